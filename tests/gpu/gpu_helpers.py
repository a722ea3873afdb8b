"""What the GPU test files share: how many GPUs torch sees, mpibench under mpirun on some
of them, and the modes each collective has on torch (tests/test_nccl_path_cpu.py checks
MODES against the collective registry on CPU, so a GPU test never expects a row that a
correct run does not print)."""
import functools
import json
import os
import subprocess

import pytest

from conftest import MPIRUN, PYTHON, mpirun, show

torch = pytest.importorskip("torch")


@functools.lru_cache(maxsize=None)
def gpu_count():
    """The CUDA GPUs torch sees, asked of a child process: the test process itself opens no
    CUDA context (a GPU in EXCLUSIVE_PROCESS mode admits one process, the rank's)."""
    if torch.version.cuda is None:          # a CPU build: no CUDA call at all
        return 0
    try:
        return int(ask_torch("print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"))
    except (AssertionError, OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return 0

# torch.distributed's modes per collective: all_reduce and reduce in place only,
# all_to_all and sendrecv out of place only
MODES = {"all_reduce": ("in",), "all_gather": ("out", "in"), "reduce_scatter": ("out", "in"),
         "broadcast": ("out", "in"), "reduce": ("in",), "all_to_all": ("out",),
         "sendrecv": ("out",), "gather": ("out", "in"), "scatter": ("out", "in"),
         "alltoallv": ("out",)}
KEYS = {"out": "out_of_place", "in": "in_place"}
COLLECTIVES = set(MODES)
NEEDS_TWO = {"sendrecv"}           # a peer: not run at world size 1


def ask_torch(script):
    """The last word a child python prints running script after `import torch` (the test
    process opens no CUDA context: gpu_count)."""
    done = subprocess.run([PYTHON, "-c", "import torch\n" + script],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[-1]


def needs(n, launcher=True):
    """The skip mark for a file whose tests need n GPUs (and, launcher: mpirun)."""
    found = gpu_count()
    if found < n:
        return pytest.mark.skip(reason=f"needs {n} or more CUDA GPUs, torch sees {found}")
    if launcher and not os.path.exists(MPIRUN):
        return pytest.mark.skip(reason="needs mpirun: none in the venv's bin/ nor on PATH")
    return pytest.mark.usefixtures()


def gpus(n, args, env=None, timeout=600):
    """mpibench ARGS on n GPUs, one rank each, under mpirun."""
    return mpirun(n, args, env=env, timeout=timeout)


def doc(path):
    return json.loads(path.read_text())


def measured(rows):
    """Every mode's figures of every row, in the order the modes are listed."""
    return [r[KEYS[m]] for r in rows for m in MODES[r["collective"]] if r.get(KEYS[m])]


def expected_modes(rows):
    """(collective, mode key) a correct run fills, per row; rows must show exactly these."""
    return [(r["collective"], KEYS[m]) for r in rows for m in MODES[r["collective"]]]


def filled_modes(rows):
    return [(r["collective"], k) for r in rows for k in ("out_of_place", "in_place") if r.get(k)]


def checked_run(n, collectives, args, out):
    """run --backend nccl on n GPUs with -c 1: exit 0, the modes torch has, nothing wrong;
    returns the rows."""
    done = gpus(n, ["run", "--backend", "nccl", "--collectives", ",".join(sorted(collectives)),
                    "-c", "1", "--json", str(out)] + list(args))
    assert done.returncode == 0, show(done)
    rows = doc(out)["results"]
    assert {r["collective"] for r in rows} == set(collectives), show(done)
    assert filled_modes(rows) == expected_modes(rows)
    for r in rows:
        for m in MODES[r["collective"]]:
            want = None if n == 1 and undefined_alone(r["collective"], m) else 0
            assert r[KEYS[m]]["nwrong"] == want, r
    return rows


def undefined_alone(collective, mode):
    """Whether a lone rank's output of that mode is no check value (broadcast out of place:
    the root's receive buffer is no part of a torch broadcast), as the collective says."""
    from mpibench.measure.collectives import REGISTRY
    from mpibench.measure.collectives.base import Ctx
    from mpibench.measure.dtypes import DTYPES
    ctx = Ctx(rank=0, n=1, root=0, op="sum", dtype=DTYPES["float32"], count=4,
              in_place=mode == "in")
    return REGISTRY[collective].expected(ctx, 0, 4) is None


def graph_args(graphs, warmup):
    """-G captures after the untimed first call (also with -w 0)."""
    return ["-b", "8", "-e", "4M", "-f", "64", "-n", "5", "-w", str(warmup), "-G", str(graphs)]

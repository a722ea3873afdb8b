"""Helpers shared by the test files: start mpibench under a real launcher and capture it.

Tests run as `.venv/bin/python -m pytest`, so sys.prefix is the venv that holds
torch, mpi4py and Open MPI's mpirun. Every helper returns a CompletedProcess (text,
stdout and stderr captured) with `.elapsed` seconds added, and kills the whole process
group if the command outlives its timeout, so that no test can hang.
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

VENV = sys.prefix
PYTHON = os.path.join(VENV, "bin", "python")
MPIRUN = os.path.join(VENV, "bin", "mpirun")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Variables a launcher (or a user) may have left in the test's own environment; any of
# them would change what launcher.detect() sees in the child processes.
_LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "MPI_LOCAL", "MV2_", "SLURM_", "TORCHELASTIC_",
                      "PRTE_", "MPIBENCH_")
_LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                   "MASTER_ADDR", "MASTER_PORT")


def base_env(env=None):
    """A clean child environment: no launcher variables, one thread per rank, short timeouts."""
    out = {k: v for k, v in os.environ.items()
           if not k.startswith(_LAUNCHER_PREFIXES) and k not in _LAUNCHER_NAMES}
    out.update(OMP_NUM_THREADS="1", MPIBENCH_INIT_TIMEOUT="30", PYTHONUNBUFFERED="1")
    out.update(env or {})
    return out


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


def mpirun(np, args, env=None, timeout=90, mpi4py=False):
    """mpirun -np NP python [-m mpi4py] -m mpibench ARGS."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    py = [PYTHON] + (["-m", "mpi4py"] if mpi4py else [])
    return run([MPIRUN] + root + ["--oversubscribe", "-np", str(np)] + py
               + ["-m", "mpibench"] + list(args), env, timeout)


def lone(args, env=None, timeout=60):
    """python -m mpibench ARGS, with no launcher at all."""
    return run([PYTHON, "-m", "mpibench"] + list(args), env, timeout)


def torchrun(nproc, args, env=None, timeout=90):
    """python -m torch.distributed.run --nproc_per_node N -m mpibench ARGS."""
    return run([PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                "-m", "mpibench"] + list(args), env, timeout)


def mpibench_lines(text):
    """The lines mpibench itself wrote to stderr: 'mpibench: ...' or 'mpibench CMD: ...'."""
    return [line for line in text.splitlines() if re.match(r"mpibench( [\w-]+)?: ", line)]


def show(done):
    """Text to attach to an assertion: the command, its code and what it printed."""
    return (f"$ {' '.join(done.args)}\nrc={done.returncode} ({getattr(done, 'elapsed', 0):.1f} s)"
            f"\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")

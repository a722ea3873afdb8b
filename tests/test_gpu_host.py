"""Hosts with NVIDIA GPUs that torch does not see: the ranks agree on --backend auto
through the side channel (one line and exit 2 when they cannot), and run, info and doctor
warn in one line; launch/mpirun.sh and sbatch/common.sh never pick a CPU-only default
python there. A fake nvidia-smi on PATH stands for the GPUs (no GPU here)."""
import os

import pytest
import torch

from conftest import ROOT, check_usage_error, mpibench_lines, mpirun, show
from launch_helpers import LAUNCH, PY, env, run
from mpibench.launch import gpuhost

FAKE_SMI = """#!/bin/sh
if [ "$1" = "-L" ]; then
  echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
  echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000001)"
  exit 0
fi
exit 9
"""


@pytest.fixture
def fake_gpus(tmp_path):
    """PATH with an nvidia-smi that lists two GPUs."""
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def test_backend_auto_is_agreed_before_the_rendezvous():
    """Rank 2 answers nccl (test switch), ranks 0 and 1 gloo: every rank exits 2 at once
    with one line naming both choices, their ranks and hosts and what torch saw, instead
    of waiting in two different rendezvous until the watchdog."""
    done = mpirun(3, ["run", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"],
                  env={"MPIBENCH_FAULT": "backend:2:nccl"}, timeout=120)
    check_usage_error(done, "--backend auto chose differently on different hosts", 60)
    line = mpibench_lines(done.stderr)[0]
    assert "gloo on host " in line and "(ranks 0, 1: torch " + torch.__version__ in line, line
    assert "nccl on host " in line and "(rank 2: torch " + torch.__version__ in line, line
    assert "--backend gloo" in line


def test_an_explicit_backend_needs_no_agreement():
    """The switch changes only what auto answers: --backend gloo runs."""
    done = mpirun(2, ["info", "--backend", "gloo"], env={"MPIBENCH_FAULT": "backend:1:nccl"})
    assert done.returncode == 0, show(done)


@pytest.mark.parametrize("command", [["run", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"],
                                     ["info"], ["doctor"]])
def test_gpus_that_torch_does_not_see_are_named_in_one_warning(fake_gpus, command):
    done = mpirun(2, command, env={"PATH": fake_gpus}, timeout=120)
    assert done.returncode == 0, show(done)
    warnings = [line for line in mpibench_lines(done.stderr) if "WARNING" in line]
    assert len(warnings) == 1, show(done)
    assert "has NVIDIA GPUs (nvidia-smi lists 2 GPUs) but torch has no CUDA there" in warnings[0]
    if torch.version.cuda is None:
        assert "fix: install a CUDA build of torch" in warnings[0]


def test_no_warning_without_gpus():
    if gpuhost.nvidia_devices():
        pytest.skip("this host has NVIDIA GPUs")
    done = mpirun(2, ["info"])
    assert done.returncode == 0 and "WARNING" not in done.stderr, show(done)


def test_nvidia_smi_that_fails_or_lists_nothing_is_no_gpu(tmp_path, monkeypatch):
    for body in ("#!/bin/sh\nexit 9\n", "#!/bin/sh\necho 'No devices were found'\n"):
        smi = tmp_path / "nvidia-smi"
        smi.write_text(body)
        smi.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
        monkeypatch.setattr(gpuhost.glob, "glob", lambda pattern: [])
        assert gpuhost.nvidia_devices() is None


# ---- the launch scripts on a GPU host --------------------------------------------
def _script_env(path, **extra):
    """launch_helpers.env() without MPIBENCH_PYTHON (the scripts pick the default)."""
    e = env()
    e.pop("MPIBENCH_PYTHON", None)
    e.update({k: str(v) for k, v in extra.items()}, PATH=path)
    return e


def test_mpirun_sh_refuses_a_default_python_without_cuda_on_a_gpu_host(fake_gpus):
    if torch.version.cuda:
        pytest.skip("this checkout's torch has CUDA")
    r = run([LAUNCH / "mpirun.sh", "--np", "2", "--oversubscribe", "info"],
            env=_script_env(fake_gpus), timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stdout + r.stderr
    assert lines[0].startswith("mpirun.sh: this host has NVIDIA GPUs but the default python ")
    assert f"has torch {torch.__version__} without CUDA: it would benchmark the CPUs" in lines[0]
    assert "set MPIBENCH_PYTHON" in lines[0] and r.stdout == ""


def test_mpirun_sh_takes_the_python_it_is_given_and_mpibench_warns(fake_gpus):
    r = run([LAUNCH / "mpirun.sh", "--np", "2", "--oversubscribe", "info"],
            env=_script_env(fake_gpus, MPIBENCH_PYTHON=PY), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "torch has no CUDA there" in warnings[0], r.stderr


def test_mpirun_sh_takes_the_default_python_on_a_host_without_gpus():
    if gpuhost.nvidia_devices():
        pytest.skip("this host has NVIDIA GPUs")
    r = run([LAUNCH / "mpirun.sh", "--np", "2", "--dry-run", "info"],
            env=_script_env(os.environ["PATH"]), timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{ROOT}/.venv/bin/python -m mpibench info" in r.stdout


@pytest.mark.parametrize("gpus", [True, False])
def test_sbatch_common_sh_picks_the_python_as_mpirun_sh(fake_gpus, tmp_path, gpus):
    """common.sh sourced as the sbatch scripts do (SLURM's job variables given by hand)."""
    if gpus and torch.version.cuda:
        pytest.skip("this checkout's torch has CUDA")
    if not gpus and gpuhost.nvidia_devices():
        pytest.skip("this host has NVIDIA GPUs")
    path = fake_gpus if gpus else os.environ["PATH"]
    r = run(["bash", "-c", 'set -euo pipefail; source sbatch/common.sh; echo "$MPIBENCH_PYTHON"'],
            env=_script_env(path, SLURM_JOB_ID="7", MPIBENCH_HOME=ROOT,
                            MPIBENCH_RESULTS=tmp_path), timeout=60, cwd=ROOT)
    if gpus:
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stderr.startswith("mpibench job: this host has NVIDIA GPUs but the default "
                                   f"python {ROOT}/.venv/bin/python has torch"), r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == f"{ROOT}/.venv/bin/python"

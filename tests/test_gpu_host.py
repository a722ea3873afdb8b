"""Hosts with NVIDIA GPUs that torch does not see: the ranks agree on --backend auto
through the side channel (one line and exit 2 when they cannot), and run, info and doctor
warn in one line; launch/mpirun.sh and sbatch/common.sh never pick a CPU-only default
python there. A fake nvidia-smi on PATH stands for the GPUs (no GPU here)."""
import os
import re

import pytest
import torch

from conftest import ROOT, check_usage_error, mpibench_lines, mpirun, show
from launch_helpers import LAUNCH, PY, ensure_mpich, env, run
import fakecluster  # noqa: E402  (launch_helpers put launch/ on sys.path)
from fakecluster import FakeCluster  # noqa: E402
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


@pytest.mark.usefixtures("procs")
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


@pytest.mark.usefixtures("procs")
def test_an_explicit_backend_needs_no_agreement():
    """The switch changes only what auto answers: --backend gloo runs."""
    done = mpirun(2, ["info", "--backend", "gloo"], env={"MPIBENCH_FAULT": "backend:1:nccl"})
    assert done.returncode == 0, show(done)


@pytest.mark.parametrize("command", [["run", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"],
                                     ["info"], ["doctor"]])
@pytest.mark.usefixtures("procs")
def test_gpus_that_torch_does_not_see_are_named_in_one_warning(fake_gpus, command):
    done = mpirun(2, command, env={"PATH": fake_gpus}, timeout=120)
    assert done.returncode == 0, show(done)
    warnings = [line for line in mpibench_lines(done.stderr) if "WARNING" in line]
    assert len(warnings) == 1, show(done)
    assert "has NVIDIA GPUs (nvidia-smi lists 2 GPUs) but torch has no CUDA there" in warnings[0]
    if torch.version.cuda is None:
        assert "fix: install a CUDA build of torch" in warnings[0]


@pytest.mark.usefixtures("procs")
def test_no_warning_without_gpus():
    if gpuhost.nvidia_devices():
        pytest.skip("this host has NVIDIA GPUs")
    done = mpirun(2, ["info"])
    assert done.returncode == 0 and "WARNING" not in done.stderr, show(done)


@pytest.mark.usefixtures("procs")
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


@pytest.mark.usefixtures("procs")
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


@pytest.mark.usefixtures("procs")
def test_mpirun_sh_takes_the_python_it_is_given_and_mpibench_warns(fake_gpus):
    r = run([LAUNCH / "mpirun.sh", "--np", "2", "--oversubscribe", "info"],
            env=_script_env(fake_gpus, MPIBENCH_PYTHON=PY), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    warnings = [line for line in r.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1 and "torch has no CUDA there" in warnings[0], r.stderr


@pytest.mark.usefixtures("procs")
def test_mpirun_sh_takes_the_default_python_on_a_host_without_gpus():
    if gpuhost.nvidia_devices():
        pytest.skip("this host has NVIDIA GPUs")
    r = run([LAUNCH / "mpirun.sh", "--np", "2", "--dry-run", "info"],
            env=_script_env(os.environ["PATH"]), timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{ROOT}/.venv/bin/python -m mpibench info" in r.stdout


@pytest.mark.parametrize("gpus", [True, False])
@pytest.mark.usefixtures("procs")
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


# ---- CUDA_VISIBLE_DEVICES is each host's own --------------------------------------
needs_hosts = pytest.mark.usefixtures("hosts")

# As ssh does: the remote host's own environment, where SLURM would have set h2's value.
AGENT = """#!/bin/sh
for a in "$@"; do case "$a" in -*) ;; *) host=$a; break ;; esac; done
if [ "$host" = h2 ]; then export CUDA_VISIBLE_DEVICES=5; else unset CUDA_VISIBLE_DEVICES; fi
exec {agent} "$@"
"""


@needs_hosts
@pytest.mark.parametrize("kind", ["openmpi", "hydra"])
def test_cuda_visible_devices_is_not_forwarded_to_other_hosts(tmp_path, kind):
    """The launching shell's CUDA_VISIBLE_DEVICES=0 reaches the ranks on its own host only;
    h2's ranks keep h2's own value (doctor prints each host's)."""
    e = env(CUDA_VISIBLE_DEVICES="0")
    with FakeCluster(hosts=2) as c:
        agent = tmp_path / "agent"
        agent.write_text(AGENT.format(agent=c.agent))
        agent.chmod(0o755)
        if kind == "openmpi":
            how = ["--mca", "plm_rsh_agent", agent]
        else:
            try:
                mpiexec, lib = ensure_mpich()
            except RuntimeError as exc:
                pytest.skip(str(exc))
            e.update(MPIRUN=mpiexec, MPI4PY_LIBMPI=lib)
            how = ["--mpi-arg", "-launcher", "--mpi-arg", "ssh",
                   "--mpi-arg", "-launcher-exec", "--mpi-arg", agent]
        argv = [LAUNCH / "mpirun.sh", "--host", "h1:1,h2:1", *how, "--", "doctor", "--no-nccl"]
        try:
            r = c.run_on("h1", [str(a) for a in argv], env=e, timeout=120)
        finally:
            c._kill_strays()
    assert r.returncode == 0, r.stdout + r.stderr
    seen = dict(re.findall(r"^# host (h\d) .*?CUDA_VISIBLE_DEVICES (\S+)$", r.stdout, re.M | re.S))
    assert seen == {"h1": "0", "h2": "5"}, r.stdout


# ---- which GPU each rank drives -----------------------------------------------------
def test_device_choice_of_ranks_bound_per_task_or_sharing_all(monkeypatch):
    """Pure logic with patched device counts: eight ranks of a host that each see one GPU
    (srun --gpus-per-task=1, --gpu-bind=single:1) all take device 0 of their own GPU;
    NCCL_TESTS_DEVICE picks one index on every rank, as in nccl-tests; two ranks on one
    physical GPU are refused, naming binding per task."""
    pick = gpuhost.device_index
    assert [pick(r, 1, {})[0] for r in range(8)] == [0] * 8
    assert [pick(r, 8, {})[0] for r in range(8)] == list(range(8))
    assert [pick(r, 2, {})[0] for r in range(4)] == [0, 1, 0, 1]
    assert pick(5, 4, {"NCCL_TESTS_DEVICE": "2"}) == (2, None)
    assert "not a device index below the 4 GPUs" in pick(0, 4, {"NCCL_TESTS_DEVICE": "4"})[1]
    assert "NCCL_TESTS_DEVICE=x" in pick(0, 4, {"NCCL_TESTS_DEVICE": "x"})[1]
    assert pick(0, 0, {})[0] is None
    per_task = [("h1", f"GPU-{r}", 1, 0) for r in range(8)]
    assert gpuhost.shared_gpu(per_task, {}) is None
    assert gpuhost.shared_gpu(per_task + [("h2", "GPU-0", 1, 0)], {}) is None   # another host
    crowded = [("h1", f"GPU-{r % 4}", 4, r % 4) for r in range(8)]
    text = gpuhost.shared_gpu(crowded, {})
    assert text.startswith("ranks 0 and 4 on host h1 would share one GPU (GPU-0, device 0 of "
                           "the 4 rank 4 sees)") and "--gpus-per-task=1" in text, text
    forced = [("h1", "GPU-2", 4, 2)] * 2
    assert "(NCCL_TESTS_DEVICE=2)" in gpuhost.shared_gpu(forced, {"NCCL_TESTS_DEVICE": "2"})


@pytest.mark.usefixtures("procs")
def test_doctor_agrees_on_devices_through_the_side_channel(tmp_path):
    """Three ranks under mpirun on one host, each seeing two GPUs of the same ids (the test
    switch stands for them): local ranks 0 and 2 both take device 0 (Open MPI may number
    local ranks in another order than ranks), and doctor says why it did not check rather
    than starting two probes on one GPU."""
    planted = ",".join(f"ncclcheck:{r}:GPU-a/GPU-b" for r in range(3))
    done = mpirun(3, ["doctor", "--nccl-timeout", "60"], env={"MPIBENCH_FAULT": planted},
                  timeout=180)
    assert done.returncode == 0, show(done)
    assert re.search(r"not checked: ranks \d and (\d) on host \S+ would share one GPU \(GPU-a, "
                     r"device 0 of the 2 rank \1 sees\): .*--gpus-per-task=1", done.stdout), show(done)

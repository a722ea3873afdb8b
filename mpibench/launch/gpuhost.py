"""Whether this host has NVIDIA GPUs, and what torch sees of them: a host can have GPUs
torch does not see (a CPU-only wheel, a driver that is down, an empty CUDA_VISIBLE_DEVICES),
where --backend auto would benchmark the CPUs. launch/mpirun.sh and sbatch/common.sh test
the host alike."""
import glob
import os
import subprocess
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

# what no_cuda() finds: what says the host has GPUs, what torch sees, whether its build is CPU-only
NoCuda = Tuple[str, str, bool]


def nvidia_devices() -> Optional[str]:
    """What says this host has NVIDIA GPUs ('/dev/nvidia0, /dev/nvidia1' or 'nvidia-smi lists
    2 GPUs'), or None. nvidia-smi -L where no device files show (a container may lack them)."""
    found = sorted(glob.glob("/dev/nvidia[0-9]*"))
    if found:
        return ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (subprocess.TimeoutExpired, OSError):        # OSError: no nvidia-smi
        return None
    gpus = [line for line in done.stdout.splitlines() if line.startswith("GPU ")]
    if done.returncode != 0 or not gpus:
        return None
    return f"nvidia-smi lists {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"


def torch_view() -> str:
    """What torch on this rank sees, in a few words: its version and build, the GPUs."""
    import torch
    import torch.distributed as dist
    if not torch.version.cuda:
        return f"torch {torch.__version__} (a CPU-only build)"
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    text = (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees "
            f"{count} GPU{'s' if count != 1 else ''}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        text += f" with CUDA_VISIBLE_DEVICES='{visible}'"
    if count and not dist.is_nccl_available():
        text += ", no NCCL"
    return text


DEVICE_VAR = "NCCL_TESTS_DEVICE"     # nccl-tests' variable, with its meaning


def visible_gpus() -> List[str]:
    """What identifies each GPU torch sees here, in index order: its UUID (two ranks bound
    to different GPUs both see theirs as device 0; the UUID tells them apart)."""
    import torch
    if not torch.cuda.is_available():
        return []
    return [str(getattr(torch.cuda.get_device_properties(i), "uuid", i))
            for i in range(torch.cuda.device_count())]


def device_index(local_rank: int, count: int, env: Mapping[str, str]) -> Tuple[Optional[int], Optional[str]]:
    """(this rank's CUDA device index, error or None): NCCL_TESTS_DEVICE=K, else the local rank
    modulo the GPUs it sees (fewer than its host's ranks where bound per task, e.g. srun --gpu-bind)."""
    if not count:
        return None, "torch sees no GPU on this rank"
    given = env.get(DEVICE_VAR)
    if not given:
        return local_rank % count, None
    if not given.strip().isdigit() or int(given) >= count:
        return None, (f"{DEVICE_VAR}={given}: not a device index below the {count} GPU"
                      f"{'s' if count != 1 else ''} this rank sees")
    return int(given), None


def shared_gpu(told: Sequence[Tuple[Optional[str], Optional[str], int, Optional[int]]],
               env: Mapping[str, str]) -> Optional[str]:
    """The error when two ranks of a host would drive one GPU, else None. told[r]: rank r's
    (host, GPU id, count it sees, index chosen)."""
    first: Dict[Tuple[Optional[str], str], int] = {}
    for r, (host, gpu, count, index) in enumerate(told):
        if gpu is None:
            continue
        if (host, gpu) in first:
            o = first[(host, gpu)]
            forced = f" ({DEVICE_VAR}={env[DEVICE_VAR]})" if env.get(DEVICE_VAR) else ""
            return (f"ranks {o} and {r} on host {host} would share one GPU ({gpu}, device "
                    f"{index} of the {count} rank {r} sees{forced}): give each rank its own, "
                    f"with at most one rank per visible GPU on each host, or bind one GPU per "
                    f"task (srun --gpus-per-task=1 or --gpu-bind=single:1, a per-rank "
                    f"CUDA_VISIBLE_DEVICES), or {DEVICE_VAR} on each rank")
        first[(host, gpu)] = r
    return None


def no_cuda() -> Optional[NoCuda]:
    """(what says the host has GPUs, what torch sees, whether torch is a CPU-only build) when
    this host has NVIDIA GPUs and torch here has no CUDA (only then imported), else None."""
    devices = nvidia_devices()
    if devices is None:
        return None
    import torch
    if torch.cuda.is_available():
        return None
    return devices, torch_view(), torch.version.cuda is None


def no_cuda_line(per_host: Mapping[str, NoCuda]) -> str:
    """The one warning line for {host: no_cuda()} of the hosts it named."""
    hosts = list(per_host)
    devices, view, cpu_only = per_host[hosts[0]]
    where = f"host {hosts[0]}" if len(hosts) == 1 else f"{len(hosts)} hosts ({', '.join(hosts[:4])}" \
        + (", ...)" if len(hosts) > 4 else ")")
    return (f"mpibench: WARNING: {where} {'has' if len(hosts) == 1 else 'have'} NVIDIA GPUs "
            f"({devices}) but torch has no CUDA there ({view}), so this job runs on the CPUs; "
            + ("fix: install a CUDA build of torch in the Python that starts mpibench (set "
               "MPIBENCH_PYTHON for launch/mpirun.sh and sbatch/)" if cpu_only else
               "fix: check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES"))

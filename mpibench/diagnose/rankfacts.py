"""Facts about this rank (versions, device, the variables that shape the network) and where
a command ran, gathered on rank 0 for its preamble and its results document."""
import os
import platform
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .. import __version__
from ..launch.comm import mpi_library_version
from ..results import preamble as text

if TYPE_CHECKING:
    from ..launch.session import Session
    from ..results.output import RunOutput

# Variable prefixes that change what the network does; shown in headers and compared.
NET_PREFIXES = ("NCCL_", "GLOO_", "UCX_", "OMPI_MCA_", "TORCH_NCCL_", "MPIBENCH_")


def versions() -> Dict[str, Optional[str]]:
    import torch
    import torch.distributed as dist
    out = {"mpibench": __version__, "python": platform.python_version(), "torch": torch.__version__,
           "nccl": None, "mpi4py": None, "mpi": mpi_library_version()}
    with suppress(ImportError):         # a torchrun job may run without it: a fact, not an error
        import mpi4py
        out["mpi4py"] = mpi4py.__version__
    if torch.cuda.is_available() and dist.is_nccl_available():
        try:
            out["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:
            out["nccl"] = "unknown"
    return out


# Set by mpirun itself for every process: not the user's settings.
_LAUNCHER_SET = ("OMPI_MCA_PREFIXES", "OMPI_MCA_cpu_type", "OMPI_MCA_initial_wdir",
                 "OMPI_MCA_num_procs", "OMPI_MCA_ess_", "OMPI_MCA_orte_", "OMPI_MCA_pmix_")


# Where the launch scripts find things (launch/, sbatch/): not network settings.
# The test switches: their own header line says whether they are set (launch/faults.py).
_SCRIPT_VARS = ("MPIBENCH_FAULT", "MPIBENCH_TESTING", "MPIBENCH_HOME", "MPIBENCH_PYTHON", "MPIBENCH_RESULTS",
                "MPIBENCH_PPN", "MPIBENCH_FORWARD", "MPIBENCH_SRUN_MPI")


def net_env() -> Dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(NET_PREFIXES)
            and not k.startswith(_LAUNCHER_SET) and k not in _SCRIPT_VARS}


def rank_record(session: "Session") -> Dict[str, Any]:
    """What every rank tells rank 0 about itself (JSON config.devices entry)."""
    rec, device = {"rank": session.rank, "pid": session.pid, "hostname": session.hostname,
                   "local_rank": session.local_rank}, session.device
    if device is None or device.type != "cuda":
        return dict(rec, device="cpu", device_name=platform.processor() or platform.machine(), bus_id=None)
    import torch
    props = torch.cuda.get_device_properties(device)
    bus = (f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:"
           f"{getattr(props, 'pci_device_id', 0):02x}") if hasattr(props, "pci_bus_id") else None
    return dict(rec, device=f"cuda:{device.index}", device_name=props.name, bus_id=bus)


def peak_rss_bytes() -> Optional[int]:
    """This process's peak resident memory so far (VmHWM), or None where /proc does not say."""
    with suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def gather(session: "Session") -> Tuple[Optional[List[Dict[str, Any]]],
                                      Optional[List[Dict[str, Optional[str]]]]]:
    """(records, versions) of every rank on rank 0; (None, None) elsewhere."""
    return session.comm.gather(rank_record(session), root=0), session.comm.gather(versions(), root=0)


def world(session: "Session", backends: Optional[str]) -> Dict[str, Any]:
    """Where the job ran, as the results document records it."""
    assert session.hosts is not None
    return {"size": session.size, "hosts": list(dict.fromkeys(session.hosts)),
            "launcher": session.launcher, "backend": backends, "rendezvous": session.rendezvous,
            "barrier": session.comm.barrier_kind}


def describe(session: "Session", out: Optional["RunOutput"], backend_names: Sequence[str],
             records: Optional[Sequence[Dict[str, Any]]],
             versions: Optional[Sequence[Dict[str, Optional[str]]]], config: Mapping[str, Any]) -> None:
    """Rank 0: print the devices, backend, versions and env lines; record them in out."""
    assert out is not None and records is not None and versions is not None
    per_host: Dict[str, Dict[str, Optional[str]]] = {}
    for r, v in zip(records, versions):
        per_host.setdefault(r["hostname"], v)
    env, where = net_env(), world(session, ", ".join(backend_names))
    text.describe(out, records, where, len(backend_names), per_host, env)
    out.set(versions=per_host, env=env, world=where, config={"devices": records, **config})

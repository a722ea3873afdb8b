"""From launcher variables to a ready process group, with no torchrun rendezvous needed.

start() builds the Session every command runs in: the side channel, each rank's host and
local rank, the backend and device, and the torch.distributed process group, whose
rendezvous address rank 0 chooses and MPI broadcasts. Errors that can differ between ranks
go through Session.agree() so that every rank exits the same way.
"""
import datetime
import hashlib
import json
import os
import socket
from contextlib import suppress
from typing import (TYPE_CHECKING, Any, Dict, Hashable, List, Mapping, MutableMapping, NamedTuple,
                    Optional, Sequence, Tuple, TypeVar)

from .. import __version__
from ..errors import Exit, UsageError
from . import faults, gpuhost, netaddr, rails, torchenv, verdict
from .comm import Comm, MPIComm, StoreComm, mpi_library_version
from .launcher import Placement
from .session import Session
from .slurm import compress_hostlist, expand_nodelist
from .watchdog import Watchdog

if TYPE_CHECKING:
    from torch.distributed import Store, TCPStore

H = TypeVar("H", bound=Hashable)

TORCH_BACKENDS = ("nccl", "gloo")


# The side channel between the ranks, made before the Session: the communicator; without
# MPI also the rendezvous store and its "addr:port".
class Link(NamedTuple):
    comm: Comm
    store: Optional["Store"] = None
    address: Optional[str] = None


def connect(place: Placement) -> Link:
    """The ranks' side channel (a Link). The caller holds it from here on, so that a failure
    before start() returns can still abort the job through it."""
    env = os.environ
    if place.uses_mpi:
        comm = MPIComm()
        if place.size is not None and comm.size != place.size:
            raise UsageError(
                f"the launcher ({place.launcher}) says {place.size} ranks but MPI sees {comm.size}: "
                f"mpi4py is using a different MPI library than the launcher "
                f"({mpi_library_version()}); use the mpirun of the MPI that mpi4py loads")
        return Link(comm)
    if place.launcher in ("torchrun", "env", "slurm"):
        import torch.distributed as dist
        addr, port = (_slurm_master(env) if place.launcher == "slurm"
                      else (env.get("MASTER_ADDR"), env.get("MASTER_PORT")))
        missing = [v for v, value in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if not value]
        if missing:
            raise UsageError(f"{' and '.join(missing)} not set: without an MPI launcher the ranks "
                             f"need a rendezvous address (torchrun sets it)")
        timeout = datetime.timedelta(seconds=float(env.get("MPIBENCH_INIT_TIMEOUT", "300")))
        size = place.size
        assert size is not None         # torchrun and srun say it (launcher.detect)
        store, _, _ = next(dist.rendezvous(f"tcp://{addr}:{port}", place.rank, size,
                                           timeout=timeout))
        return Link(StoreComm(dist.PrefixStore("mpibench-comm", store), place.rank, size),
                    store, f"{addr}:{port}")
    return Link(Comm())


def _slurm_master(env: Mapping[str, str]) -> Tuple[str, str]:
    """(addr, port) of the rendezvous under plain srun, which gives no MPI: MASTER_ADDR and
    MASTER_PORT where set, else the step's first node and a port from the job id."""
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not addr:
        nodes = expand_nodelist(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
        if not nodes:
            raise UsageError("srun started this job but SLURM_STEP_NODELIST is empty: set MASTER_ADDR")
        addr = nodes[0]
    if not port:
        job = int(env.get("SLURM_JOB_ID", "0") or 0)
        step = int(env.get("SLURM_STEP_ID", "0") or 0)
        port = str(20000 + (job * 16 + step) % 20000)
    return addr, port


def _agreed_backend(session: Session, name: str) -> str:
    """The backend --backend names (auto: nccl with CUDA and NCCL, else gloo), checked and compared
    on every rank before any rendezvous: auto decided by one rank alone would leave a host whose
    torch sees no GPU in a gloo rendezvous while the others wait in NCCL's."""
    import torch
    import torch.distributed as dist
    cuda, nccl = torch.cuda.is_available(), dist.is_nccl_available()
    error = None
    if name == "nccl" and not cuda:
        error = ("--backend nccl needs a CUDA GPU, and torch sees none on this host "
                 f"(torch {torch.__version__}); use --backend gloo")
    elif name == "nccl" and not nccl:
        error = f"--backend nccl: this torch ({torch.__version__}) was built without NCCL"
    session.agree(error)
    if name != "auto":
        return name
    backend = "nccl" if cuda and nccl else "gloo"
    forced = faults.get("backend", session.rank) or None    # test switch: as if torch saw otherwise
    view = gpuhost.torch_view() + (" (test fault switch MPIBENCH_FAULT=backend)" if forced else "")
    told = session.comm.allgather((forced or backend, view))
    if len({b for b, _ in told}) > 1:
        raise UsageError("--backend auto chose differently on different hosts: " + "; ".join(
            f"{b} on {_hosts_of(session, ranks)} ({_ranks(ranks)}: {v})"
            for (b, v), ranks in grouped(told).items())
            + "; every host needs a torch that sees its GPUs (mpibench doctor shows each "
              "host's), or give --backend gloo to measure the CPUs")
    return backend


def grouped(values: Sequence[H]) -> Dict[H, List[int]]:
    """{value: [ranks]} in order of first appearance."""
    return {v: [r for r, x in enumerate(values) if x == v] for v in dict.fromkeys(values)}


def _hosts_of(session: Session, ranks: Sequence[int]) -> str:
    hosts = list(dict.fromkeys(session.hosts[r] for r in ranks))
    return f"host{'s' if len(hosts) > 1 else ''} {compress_hostlist(hosts)}"


def _warn_if_gpus_unseen(session: Session) -> None:
    """Rank 0 warns in one line of the hosts with NVIDIA GPUs where torch has no CUDA."""
    seen = gpuhost.no_cuda() if session.local_rank == 0 else None   # once per host
    told = session.comm.gather((session.hostname, seen), root=0)
    per_host = {h: seen for h, seen in told if seen} if told is not None else None   # rank 0
    if per_host:
        verdict.note(gpuhost.no_cuda_line(per_host))     # it starts with "mpibench: "


def gpu_index(session: Session, env: Mapping[str, str],
              gpus: Optional[List[str]] = None) -> Tuple[Optional[int], Optional[str]]:
    """(this rank's CUDA device index, error or None), agreed by every rank so that no two ranks
    of a host drive one GPU. gpus: the ids of those this rank sees (default: visible_gpus())."""
    gpus = gpuhost.visible_gpus() if gpus is None else gpus
    index, error = gpuhost.device_index(session.local_rank, len(gpus), env)
    mine = None if index is None else (session.hostname, gpus[index], len(gpus), index)
    told = session.comm.allgather(mine)
    return index, error or gpuhost.shared_gpu([t or (None, None, 0, None) for t in told], env)


def _same_start(session: Session, prints: List[str], argv: Optional[Sequence[str]]) -> None:
    """UsageError on every rank if the ranks were started with different arguments or versions."""
    if len(set(prints)) <= 1:
        return
    told = session.comm.allgather((__version__, list(argv or [])))
    parts = []
    for ranks in sorted(grouped(prints).values()):
        version, args = told[ranks[0]]
        hosts = ", ".join(dict.fromkeys(session.hosts[r] for r in ranks))
        parts.append(f"{_ranks(ranks)} (host {hosts}): mpibench {version} with "
                     f"'{' '.join(args)[:200]}'")
    raise UsageError("the ranks were started differently, every rank needs the same mpibench "
                     "and arguments: " + "; ".join(parts))


def _ranks(ranks: Sequence[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8]) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")
    return f"rank{'s' if len(ranks) > 1 else ''} {shown}"


def _eager(session: Session, backend: str) -> Dict[str, Any]:
    """init_process_group's device_id (torch >= 2.3) for NCCL: the communicator is then created
    at once, not by the first collective (which may sit in a CUDA graph's capture or a timed row)."""
    return {"device_id": session.device} if backend == "nccl" and session.device is not None else {}


def _init_pg(session: Session, backend: str, env: MutableMapping[str, str], link: Link,
             timeout: float) -> None:
    import torch.distributed as dist
    # the backend's own timeout, well above the watchdog's so that the watchdog speaks first
    td = datetime.timedelta(seconds=max(1800.0, 2 * timeout + 60))
    how: Dict[str, Any]     # init_process_group's store, or its init_method
    if link.store is not None:                     # torchrun / srun: the store already exists
        how = {"store": dist.PrefixStore("mpibench-pg", link.store)}
        session.rendezvous = f"{link.address} ({session.launcher})"
    elif env.get("MASTER_ADDR") and env.get("MASTER_PORT"):   # the user's values win
        how = {"init_method": "env://"}
        session.rendezvous = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']} (MASTER_ADDR/MASTER_PORT)"
    else:
        tcp, addr, port = rank0_store(session, env, td)
        how = {"store": tcp}
        by = "single process" if session.size == 1 else "chosen by rank 0, sent through MPI"
        session.rendezvous = f"{addr}:{port} ({by})"
    if backend == "nccl":
        torchenv.keep_rank_on_nccl_errors(env)
    dist.init_process_group(backend, rank=session.rank, world_size=session.size, timeout=td,
                            **how, **_eager(session, backend))
    session.pg = True


def rank0_store(session: Session, env: Mapping[str, str], timeout: datetime.timedelta,
                join: bool = True) -> Tuple[Optional["TCPStore"], str, int]:
    """(store, addr, port) of a TCPStore rank 0 opens where the other hosts reach it; the others
    join it (join=False: only learn where it is, store None). Exit on every rank if it cannot."""
    import torch.distributed as dist
    store: Optional["TCPStore"] = None
    found: Optional[Tuple[Optional[str], Optional[int], Optional[str]]] = None   # (addr, port, error)
    if session.rank == 0:
        try:
            peers = [a for a, h in zip(session.addresses, session.hosts) if a and h != session.hostname]
            ours = netaddr.reachable_address(env, peers)
            store = dist.TCPStore(ours, 0, session.size, True, timeout=timeout, wait_for_workers=False)
            found = (ours, store.port, None)
        except Exception as exc:
            found = (None, None, f"rank 0 could not open the rendezvous store: {exc}")
    told = session.comm.bcast(found, root=0)
    assert told is not None         # rank 0's
    addr, port, error = told
    if error:
        raise Exit(error, 1)
    assert addr is not None and port is not None
    if store is None and join:
        store = dist.TCPStore(addr, port, session.size, False, timeout=timeout)
    return store, addr, port


def _primary_address() -> Optional[str]:
    addr = None
    with suppress(OSError):
        addr = socket.gethostbyname(socket.gethostname())
    if not addr or addr.startswith("127."):
        addr = next((a for a in netaddr.interface_addresses().values() if not a.startswith("127.")), None)
    return addr


def start(place: Placement, backend: Optional[str] = "auto", timeout: float = 300.0,
          argv: Optional[Sequence[str]] = None, link: Optional[Link] = None,
          rails_spec: Optional[str] = None) -> Session:
    """Build the Session. backend: auto|nccl|gloo, or None for no process group; timeout: the
    watchdog's per step; argv: the same on every rank; rails_spec: else the environment's."""
    env = os.environ
    link = connect(place) if link is None else link
    session = Session(place, link.comm)
    # what every rank must share: the mpibench version and the command line
    same = hashlib.sha256(json.dumps([__version__, list(argv or [])]).encode()).hexdigest()[:16]
    facts = session.comm.allgather((session.hostname, _primary_address(), same))
    session.hosts = [f[0] for f in facts]
    session.addresses = [f[1] for f in facts]
    _same_start(session, [f[2] for f in facts], argv)
    session.watch = Watchdog(session, timeout)
    if session.comm.kind == "mpi" and not session.comm.threads and session.rank == 0:
        verdict.note(f"MPI granted {session.comm.thread_level}, not MPI_THREAD_MULTIPLE: the hang "
                     f"watchdog cannot ask the other ranks where they are, so a hang names only "
                     f"the step of the rank that saw it (Cray MPICH: export "
                     f"MPICH_MAX_THREAD_SAFETY=multiple)")
    try:
        # What the launcher did not say: the ranks that share this host, in rank order.
        here = grouped(session.hosts)[session.hostname]
        session.local_rank = here.index(session.rank) if place.local_rank is None else place.local_rank
        session.local_size = len(here) if place.local_size is None else place.local_size

        if faults.get("raise", session.rank) is not None:
            raise RuntimeError("test fault switch MPIBENCH_FAULT=raise made this rank fail")

        _warn_if_gpus_unseen(session)
        if backend is None:
            return session
        backend = _agreed_backend(session, backend)
        session.rail, error = rails.bind(session.local_rank, session.local_size, env, session.hostname,
                                        rails_spec)
        session.agree(error)
        import torch
        session.backend, session.device = backend, torch.device("cpu")
        if backend == "nccl":
            index, error = gpu_index(session, env)
            session.agree(error)
            assert index is not None        # no rank had an error
            torch.cuda.set_device(index)
            session.device = torch.device("cuda", index)
        session.watch.arm(f"rendezvous ({backend} process group)")
        _init_pg(session, backend, env, link, timeout)
        session.watch.disarm()
        return session
    except BaseException:
        # the caller gets no session to close: its watchdog thread must not poll MPI
        # while the job ends (MPI_Finalize, or the abort)
        session.close()
        raise

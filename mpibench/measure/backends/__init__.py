"""Backends the engine drives: torch.distributed (nccl, gloo) and MPI itself (mpi4py);
each gives buffers, bound calls, and timing loops with nothing but the collectives inside."""
from typing import TYPE_CHECKING

if TYPE_CHECKING:       # imported where made: the collectives import timing from here
    from ...launch.session import Session
    from .torchdist import TorchBackend


def make(session: "Session", name: str) -> "TorchBackend":
    """The backend for one --backend name: mpi, or the session's torch backend."""
    if name == "mpi":
        from .mpi import MPIBackend
        return MPIBackend(session)
    from .torchdist import TorchBackend
    return TorchBackend(session)

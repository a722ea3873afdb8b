"""Backends the engine drives: torch.distributed (nccl, gloo) and MPI itself (mpi4py);
each gives buffers, bound calls, and timing loops with nothing but the collectives inside."""


def make(session, name):
    """The backend object for one name given to --backend: mpi, or the session's torch backend."""
    if name == "mpi":
        from .mpi import MPIBackend
        return MPIBackend(session)
    from .torchdist import TorchBackend
    return TorchBackend(session)

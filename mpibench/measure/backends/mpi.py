"""The MPI library itself as a baseline backend: the same collectives through mpi4py.

The buffers are the torch backend's CPU buffers, seen by MPI as numpy views of the same
memory (Tensor.numpy() copies nothing); only the calls (bind_mpi) and ops differ. They are
mpi4py's buffer methods (Allreduce, not allreduce): no pickling in the timed loop. They
run on a duplicate of MPI_COMM_WORLD, apart from the side channel's gathers.
"""
from functools import partial
from operator import methodcaller
from typing import Any, Optional, Sequence

from ...errors import UsageError
from ...launch.comm import MPIComm
from ...launch.session import Session
from ..collectives.base import Call, Collective, Ctx, Tensor
from ..dtypes import DType
from .torchdist import TorchBackend

# Data types with a standard MPI datatype (mpi4py maps the numpy views to them).
MPI_DTYPES = ("float32", "float64", "int32", "int64", "int8", "uint8")


class MPIBackend(TorchBackend):
    name = "mpi"
    missing_mode = "mpi: no call with nccl-tests' layout"

    def __init__(self, session: Session) -> None:
        if session.comm.kind != "mpi":
            raise UsageError(f"--backend mpi needs an MPI launcher (mpirun, mpiexec or "
                             f"srun --mpi=pmix) so that the ranks share one MPI job; this one was "
                             f"started by {session.launcher}")
        import torch
        super().__init__(session, self.name, torch.device("cpu"))
        side = session.comm
        assert isinstance(side, MPIComm)       # kind "mpi"
        MPI = side.MPI
        self.comm = side.world.Dup()
        self.ops = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}

    def unsupported(self, coll: Collective, dtype: DType, op: str) -> Optional[str]:
        if dtype.name not in MPI_DTYPES:
            return f"MPI has no standard {dtype.name} datatype (mpi supports {', '.join(MPI_DTYPES)})"
        if op == "avg":
            return "MPI has no average op"
        return None

    def modes(self, coll: Collective) -> Sequence[str]:
        return coll.mpi_modes or coll.modes

    def bind(self, coll: Collective, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        return coll.bind_mpi(self.comm, send, recv, ctx, nonblocking)

    def allgather_object(self, obj: Any) -> Call:
        return partial(self.comm.allgather, obj)

    def default_blocking(self) -> int:
        return 2             # each call completes before the next, as OSU's loops do

    _wait = methodcaller("Wait")      # an MPI Request's

"""reduce: the root receives the reduction of every rank's count elements."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Ctx, Tensor, index, reduce_result


class Reduce(Collective):
    name = "reduce"
    reduces = True
    rooted = True
    modes = ("in",)           # torch.distributed.reduce works in place only
    mpi_modes = ("out", "in")

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        if ctx.rank != ctx.root:
            return None       # only the root's result is defined
        return reduce_result(ctx, index(ctx, start, stop))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        return partial(dist.reduce, recv, ctx.root, op=ctx.backend_op, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        from mpi4py import MPI
        fn = comm.Ireduce if nonblocking else comm.Reduce
        if not ctx.in_place:
            return partial(fn, send.numpy(), recv.numpy(), ctx.backend_op, ctx.root)
        # In place as torch's: the root reduces into its own buffer, the others only send.
        if ctx.rank == ctx.root:
            return partial(fn, MPI.IN_PLACE, recv.numpy(), ctx.backend_op, ctx.root)
        return partial(fn, recv.numpy(), None, ctx.backend_op, ctx.root)


COLLECTIVE = Reduce()

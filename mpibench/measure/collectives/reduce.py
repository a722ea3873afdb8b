"""reduce: the root receives the reduction of every rank's count elements."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Ctx, Tensor, index, mpi_send, reduce_result


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
        fn = comm.Ireduce if nonblocking else comm.Reduce
        if ctx.in_place and ctx.rank != ctx.root:     # in place as torch's: the others only send
            return partial(fn, recv.numpy(), None, ctx.backend_op, ctx.root)
        return partial(fn, mpi_send(ctx, send), recv.numpy(), ctx.backend_op, ctx.root)


COLLECTIVE = Reduce()

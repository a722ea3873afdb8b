"""all_reduce: every rank ends with the reduction of every rank's count elements."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Ctx, Tensor, index, mpi_send, reduce_result


class AllReduce(Collective):
    name = "all_reduce"
    aliases = ("allreduce",)
    nccl_ring, ring_passes, nccl_tree = True, 2, True     # a reduce-scatter then an all-gather
    reduces = True
    modes = ("in",)           # torch.distributed.all_reduce works in place only
    mpi_modes = ("out", "in")

    def busbw_factor(self, n: int) -> float:
        return 2 * (n - 1) / n

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        return reduce_result(ctx, index(ctx, start, stop))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        return partial(dist.all_reduce, recv, op=ctx.backend_op, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Iallreduce if nonblocking else comm.Allreduce
        return partial(fn, mpi_send(ctx, send), recv.numpy(), ctx.backend_op)


COLLECTIVE = AllReduce()

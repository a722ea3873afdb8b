"""all_gather: every rank contributes count elements; every rank receives all n chunks."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Counts, Ctx, Tensor, align_down, data_values, index, mpi_send


class AllGather(Collective):
    name = "all_gather"
    aliases = ("allgather",)
    algbw_scaled_before_2020 = True
    nccl_ring = True
    chunked = True

    def counts(self, count: int, elsize: int, n: int) -> Counts:
        base = align_down(count // n, elsize)
        return Counts(base, base * n, base, base, 0)

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        k = index(ctx, start, stop)
        return data_values(ctx, k // ctx.count, k % ctx.count)

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return partial(fn, recv, send, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Iallgather if nonblocking else comm.Allgather
        # In place, this rank's chunk already sits at its place in recv.
        return partial(fn, mpi_send(ctx, send), recv.numpy())


COLLECTIVE = AllGather()

"""reduce_scatter: rank r receives chunk r of the reduction of every rank's n chunks."""
from functools import partial
from typing import Any, Optional, Tuple

from .base import Call, Collective, Counts, Ctx, Tensor, align_down, index, reduce_result


class ReduceScatter(Collective):
    name = "reduce_scatter"
    aliases = ("reducescatter",)
    algbw_scaled_before_2020 = True
    nccl_ring = True
    reduces = True
    # MPI's in-place Reduce_scatter_block leaves the result at the start of the buffer,
    # not at this rank's chunk as nccl-tests' in-place row does: out-of-place only.
    mpi_modes: Optional[Tuple[str, ...]] = ("out",)
    chunked = True

    def counts(self, count: int, elsize: int, n: int) -> Counts:
        base = align_down(count // n, elsize)
        return Counts(base * n, base, base, 0, base)

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        offset = ctx.rank * ctx.count
        return reduce_result(ctx, index(ctx, offset + start, offset + stop))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return partial(fn, recv, send, op=ctx.backend_op, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Ireduce_scatter_block if nonblocking else comm.Reduce_scatter_block
        return partial(fn, send.numpy(), recv.numpy(), ctx.backend_op)


COLLECTIVE = ReduceScatter()

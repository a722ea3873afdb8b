"""scatter: the root sends its chunk r of count elements to rank r (nccl-tests' scatter:
reduce_scatter's counts and busbw factor, one sender, no reduction)."""
from functools import partial
from typing import Any, Optional

from .base import Call, Ctx, Tensor, data_values, index, mpi_send
from .reduce_scatter import ReduceScatter


class Scatter(ReduceScatter):
    name = "scatter"
    reduces = False
    rooted = True
    one_sender = True
    to_each = True
    mpi_modes = None          # MPI_IN_PLACE at the root keeps nccl-tests' in-place layout
    torch_notes = dict.fromkeys((("nccl", "out"), ("nccl", "in")), (
        "torch copies the root's own chunk with copy_ (a separate CUDA copy beside its NCCL "
        "sends), where nccl-tests' root sends it to itself through NCCL"))

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        return data_values(ctx, ctx.root, index(ctx, start, stop), dst=ctx.rank)

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        chunks = list(send.split(ctx.count)) if ctx.rank == ctx.root else None
        return partial(dist.scatter, recv, chunks, ctx.root, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Iscatter if nonblocking else comm.Scatter
        if ctx.rank != ctx.root:
            return partial(fn, None, recv.numpy(), ctx.root)
        return partial(fn, send.numpy(), mpi_send(ctx, recv), ctx.root)


COLLECTIVE = Scatter()

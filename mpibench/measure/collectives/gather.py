"""gather: every rank's count elements reach the root, rank r's at chunk r
(nccl-tests' gather: all_gather's counts and busbw factor, one receiver)."""
from functools import partial
from typing import Any, Optional

from .all_gather import AllGather
from .base import Call, Ctx, Tensor, mpi_send


class Gather(AllGather):
    name = "gather"
    rooted = True
    torch_notes = dict.fromkeys((("nccl", "out"), ("nccl", "in")), (
        "torch copies the root's own chunk with copy_ (a separate CUDA copy beside its NCCL "
        "receives), where nccl-tests' root receives it from itself through NCCL"))

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        if ctx.rank != ctx.root:
            return None       # only the root receives
        return super().expected(ctx, start, stop)

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        # The root's chunks: views made here, not in the timed loop. In place, this rank's
        # send view is its own chunk, as nccl-tests' in-place layout.
        chunks = list(recv.split(ctx.count)) if ctx.rank == ctx.root else None
        return partial(dist.gather, send, chunks, ctx.root, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Igather if nonblocking else comm.Gather
        if ctx.rank != ctx.root:
            return partial(fn, send.numpy(), None, ctx.root)
        return partial(fn, mpi_send(ctx, send), recv.numpy(), ctx.root)


COLLECTIVE = Gather()

"""broadcast: the root's count elements reach every rank."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Ctx, Tensor, data_values, index


class Broadcast(Collective):
    name = "broadcast"
    aliases = ("bcast",)
    rooted = True
    one_sender = True
    torch_notes = dict.fromkeys((("nccl", "out"), ("gloo", "out")), (
        "out-of-place is one in-place call on every rank (torch's broadcast takes one tensor): "
        "the root sends from its send buffer and its receive buffer is not written, where "
        "nccl-tests' ncclBroadcast also copies the data into it"))

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        if ctx.rank == ctx.root and not ctx.in_place:
            return None       # the root's receive buffer is not part of a torch broadcast
        return data_values(ctx, ctx.root, index(ctx, start, stop))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        tensor = send if ctx.rank == ctx.root else recv
        return partial(dist.broadcast, tensor, ctx.root, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        tensor = send if ctx.rank == ctx.root else recv
        return partial(comm.Ibcast if nonblocking else comm.Bcast, tensor.numpy(), ctx.root)


COLLECTIVE = Broadcast()

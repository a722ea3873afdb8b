"""all_to_all: rank r sends its chunk j to rank j and receives chunk r of every rank."""
from functools import partial
from typing import Any, Optional

from .base import Call, Collective, Counts, Ctx, Tensor, align_down, data_values, index


class AllToAll(Collective):
    name = "all_to_all"
    program = "alltoall"
    aliases = ("alltoall", "a2a")
    in_place_checked = False   # alltoall.cu: reportErrors = in_place ? 0 : 1
    exchange = True
    modes = ("out",)          # no in-place all_to_all in torch.distributed
    chunked = True
    to_each = True

    def counts(self, count: int, elsize: int, n: int) -> Counts:
        base = align_down(count // n, elsize)
        return Counts(base * n, base * n, base, 0, 0)

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        k = index(ctx, start, stop)
        return data_values(ctx, k // ctx.count, k % ctx.count, dst=ctx.rank)

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        return partial(dist.all_to_all_single, recv, send, async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        return partial(comm.Ialltoall if nonblocking else comm.Alltoall, send.numpy(), recv.numpy())


COLLECTIVE = AllToAll()

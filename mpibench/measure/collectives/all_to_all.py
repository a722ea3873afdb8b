"""all_to_all: rank r sends its chunk j to rank j and receives chunk r of every rank."""
from functools import partial

from .base import (Collective, Counts, align_down, data_values, fill_chunks, index,
                   per_destination, poison_value)


class AllToAll(Collective):
    name = "all_to_all"
    modes = ("out",)          # no in-place all_to_all in torch.distributed
    chunked = True

    def counts(self, count, elsize, n):
        base = align_down(count // n, elsize)
        return Counts(base * n, base * n, base, 0, 0)

    def fill(self, send, recv, ctx):
        recv.fill_(poison_value(ctx.dtype))
        fill_chunks(send, per_destination(ctx, ctx.rank))

    def expected(self, ctx, start, stop):
        k = index(ctx, start, stop)
        return data_values(ctx, k // ctx.count, k % ctx.count, dst=ctx.rank)

    def bind(self, dist, send, recv, ctx, async_op):
        return partial(dist.all_to_all_single, recv, send, async_op=async_op)

    def bind_mpi(self, comm, send, recv, ctx, nonblocking):
        return partial(comm.Ialltoall if nonblocking else comm.Alltoall, send.numpy(), recv.numpy())


COLLECTIVE = AllToAll()

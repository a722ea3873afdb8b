"""sendrecv: a ring, each rank sends count elements to rank+1 and receives from rank-1."""
from functools import partial

from .base import Collective, data_values, fill_chunks, index, poison_value


class SendRecv(Collective):
    name = "sendrecv"
    modes = ("out",)          # sending and receiving one buffer at once would race
    min_ranks = 2
    ring = True               # a rank's time is its link from rank-1: it names no host

    def fill(self, send, recv, ctx):
        import torch
        recv.fill_(poison_value(ctx.dtype))
        fill_chunks(torch, send, lambda a, b: data_values(torch, ctx, ctx.rank, index(torch, a, b, ctx.device)))

    def expected(self, ctx, start, stop):
        import torch
        return data_values(torch, ctx, (ctx.rank - 1) % ctx.n, index(torch, start, stop, ctx.device))

    def bind(self, dist, send, recv, ctx, async_op):
        ops = [dist.P2POp(dist.isend, send, (ctx.rank + 1) % ctx.n),
               dist.P2POp(dist.irecv, recv, (ctx.rank - 1) % ctx.n)]
        return partial(_async if async_op else _blocking, dist.batch_isend_irecv, ops)

    def bind_mpi(self, comm, send, recv, ctx, nonblocking):
        fn = comm.Isendrecv if nonblocking else comm.Sendrecv
        return partial(fn, send.numpy(), (ctx.rank + 1) % ctx.n, 0,
                       recv.numpy(), (ctx.rank - 1) % ctx.n, 0)


class _Both:
    """Waits for the send and the receive of one step."""
    __slots__ = ("works",)

    def __init__(self, works):
        self.works = works

    def wait(self):
        for w in self.works:
            w.wait()


def _async(batch, ops):
    return _Both(batch(ops))


def _blocking(batch, ops):
    for w in batch(ops):
        w.wait()


COLLECTIVE = SendRecv()

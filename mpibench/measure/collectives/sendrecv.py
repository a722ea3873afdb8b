"""sendrecv: a ring, each rank sends count elements to rank+1 and receives from rank-1."""
from functools import partial

from .base import Collective, data_values, index


class SendRecv(Collective):
    name = "sendrecv"
    modes = ("out",)          # sending and receiving one buffer at once would race
    min_ranks = 2
    ring = True               # a rank's time is its link from rank-1: it names no host

    def expected(self, ctx, start, stop):
        return data_values(ctx, (ctx.rank - 1) % ctx.n, index(ctx, start, stop))

    def bind(self, dist, send, recv, ctx, async_op):
        ops = exchange_ops(dist, send, (ctx.rank + 1) % ctx.n, recv, (ctx.rank - 1) % ctx.n)
        return partial(_async if async_op else exchange, dist.batch_isend_irecv, ops)

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


def exchange_ops(dist, send, to, recv, frm):
    """One send and one receive as batch_isend_irecv's ops, the receive first. NCCL groups
    them, so the order is free there. Gloo starts them in list order, and a send waits for
    the peer's receive-ready notice: with the send first, a rank could start writing its data
    before its own notice, which then waited behind that data, and the two directions ran one
    after the other. On 400 Mbit/s namespace links, 13 of 75 exchanges ran at half the rate
    with the send first, none of 75 with the receive first."""
    return [dist.P2POp(dist.irecv, recv, frm), dist.P2POp(dist.isend, send, to)]


def _async(batch, ops):
    return _Both(batch(ops))


def exchange(batch, ops):
    """Start the ops and wait for them all (the blocking call; p2p's too)."""
    for w in batch(ops):
        w.wait()


COLLECTIVE = SendRecv()

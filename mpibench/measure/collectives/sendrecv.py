"""sendrecv: a ring, each rank sends count elements to rank+1 and receives from rank-1."""
from functools import partial
from typing import Any, List, Optional

from .base import Call, Collective, Ctx, Tensor, data_values, index


class SendRecv(Collective):
    name = "sendrecv"
    in_place_checked = False   # sendrecv.cu: reportErrors = in_place ? 0 : 1
    any_redop = True
    exchange = one_peer = True
    modes = ("out",)          # sending and receiving one buffer at once would race
    min_ranks = 2
    ring = True               # a rank's time is its link from rank-1: it names no host

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        return data_values(ctx, (ctx.rank - 1) % ctx.n, index(ctx, start, stop))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        ops = exchange_ops(dist, send, (ctx.rank + 1) % ctx.n, recv, (ctx.rank - 1) % ctx.n)
        return partial(_Both if async_op else exchange, dist.batch_isend_irecv, ops)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        fn = comm.Isendrecv if nonblocking else comm.Sendrecv
        return partial(fn, send.numpy(), (ctx.rank + 1) % ctx.n, 0,
                       recv.numpy(), (ctx.rank - 1) % ctx.n, 0)


class _Both:
    """Starts the ops of one step; wait() waits for the send and the receive."""
    __slots__ = ("works",)

    def __init__(self, batch: Any, ops: List[Any]) -> None:
        self.works = batch(ops)

    def wait(self) -> None:
        for w in self.works:
            w.wait()


def exchange_ops(dist: Any, send: Tensor, to: int, recv: Tensor, frm: int) -> List[Any]:
    """One send and one receive as batch_isend_irecv's ops, the receive first: gloo starts
    them in list order and a send waits for the peer's receive-ready notice, so with the send
    first the two directions could run one after the other (docs/measured.md)."""
    return [dist.P2POp(dist.irecv, recv, frm), dist.P2POp(dist.isend, send, to)]


def one_way(dist: Any, op: Any, tensor: Tensor, peer: int) -> Call:
    """A blocking send or receive (op: dist.isend or dist.irecv) as a batch of one op: on an
    eagerly made NCCL group a plain send/recv is an unbatched op, which torch warns about on
    every rank ("unbatched P2P op ... serialized") and may give a 2-rank communicator of its
    own; a batch runs on the group's communicator, as check's exchanges do."""
    return partial(exchange, dist.batch_isend_irecv, [dist.P2POp(op, tensor, peer)])


def exchange(batch: Any, ops: List[Any]) -> None:
    """The blocking call (p2p's too): start the ops, wait for them all."""
    for w in batch(ops):
        w.wait()


COLLECTIVE = SendRecv()

"""Point-to-point between pairs of ranks: bandwidth (send/recv of one size, every
iteration after a barrier) and latency (ping-pong of a small size). Every rank walks the
same schedule in lockstep: ranks in a pair exchange on the backend being measured, the
others wait at the same MPI barriers.
"""
from functools import partial
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..launch.session import Session
from .backends.torchdist import TorchBackend
from .collectives.base import Call
from .collectives.sendrecv import exchange, exchange_ops, one_way

Pair = Tuple[int, int]


def directions(pair: Pair, bidirectional: bool) -> List[Pair]:
    """Transfers timed for one pair: (sender, receiver) in turn, or both ways at once."""
    a, b = pair
    return [(a, b)] if bidirectional else [(a, b), (b, a)]


class PairBench:
    """Transfers of `size` bytes between the ranks of each pair (both ways at once when
    bidirectional); with a round's latency, ping-pongs of latency_size bytes."""
    def __init__(self, session: Session, backend: TorchBackend, size: int, *, iters: int,
                 warmup: int, bidirectional: bool, latency_size: int = 1, latency_iters: int = 1) -> None:
        self.s, self.b, self.dist = session, backend, backend.dist
        self.size, self.iters, self.warmup, self.bidirectional = size, iters, warmup, bidirectional
        self.latency_size, self.latency_iters = latency_size, latency_iters
        self.send_buf: Any = None
        self.recv_buf: Any = None

    def allocate(self, taking_part: bool) -> Optional[str]:
        """Buffers for this rank, if in a pair; the error text or None."""
        if not taking_part:
            return None
        nbytes = max(self.size, self.latency_size)
        bufs, exc = self.b.attempt(lambda: [self.b.alloc(nbytes) for _ in range(1 + self.bidirectional)])
        if bufs is None:
            return f"out of memory for {nbytes} bytes: {type(exc).__name__}"
        self.send_buf, self.recv_buf = bufs[0], bufs[-1]      # one buffer unless bidirectional
        return None

    def _transfer(self, src: int, dst: int) -> Call:
        me, dist = self.s.rank, self.dist
        send, recv = self.send_buf[:self.size], self.recv_buf[:self.size]
        if self.bidirectional:
            peer = dst if me == src else src
            ops = exchange_ops(dist, send, peer, recv, peer)
            return partial(exchange, dist.batch_isend_irecv, ops)
        return one_way(dist, dist.isend, send, dst) if me == src else one_way(dist, dist.irecv, recv, src)

    def run_round(self, pairs: Sequence[Pair], with_latency: bool = True) -> List[Dict[str, Any]]:
        """Every rank, every round: [{'from', 'to', 'role', 'times': [s per iteration],
        'latency_s': s or None}] of this rank."""
        me = self.s.rank
        mine = next((p for p in pairs if me in p), None)
        steps = len(directions(pairs[0], self.bidirectional)) if pairs else 0
        records = []
        for step in range(steps):
            src, dst = directions(mine, self.bidirectional)[step] if mine else (-1, -1)
            call = self._transfer(src, dst) if mine else None
            if call is not None:
                for _ in range(self.warmup):
                    call()
                self.b.sync()
            latency = self._latency(mine) if with_latency and step == 0 else None
            if call is not None:
                times = self.b.time_each(call, self.iters, self.s.comm.polite_barrier)
                records.append({"from": src, "to": dst, "role": "send" if me == src else "recv",
                                "times": times, "latency_s": latency})
            else:
                for _ in range(self.iters):
                    self.s.comm.polite_barrier()
        return records

    def _latency(self, pair: Optional[Pair]) -> Optional[float]:
        """One-way latency: half a ping-pong round trip, timed by the pair's lower rank."""
        me = self.s.rank
        if pair is None:
            self.s.comm.polite_barrier()
            return None
        a, b = pair
        buf, peer = self.send_buf[:self.latency_size], b if me == a else a
        dist = self.dist
        send, recv = one_way(dist, dist.isend, buf, peer), one_way(dist, dist.irecv, buf, peer)
        first, second = (send, recv) if me == a else (recv, send)

        def call() -> None:         # one round trip
            first()
            second()
        for _ in range(self.warmup):
            call()
        self.s.comm.polite_barrier()
        seconds, _ = self.b.time_loop([call] * self.latency_iters)
        return seconds / 2 if me == a else None

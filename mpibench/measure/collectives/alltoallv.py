"""alltoallv: rank i sends rank j its own number of bytes (traffic.py), as nccl-tests 2.19's
alltoallv_perf: the traffic of mixture-of-experts layers, whose tokens split unevenly.

Counts are nccl-tests': 'count' is the per-peer count the generated pattern starts from
(0 with a matrix), the buffers hold the most any rank sends and receives, and algbw is the
largest of those in bytes over the time: the busiest rank's bandwidth."""
from functools import lru_cache, partial
from typing import Any, List, Optional, Tuple

from .base import (Call, Collective, Counts, Ctx, Tensor, align_down, data_values, fill_chunks,
                   index, poison_value)
from .traffic import Traffic, splits

Layout = Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], Tuple[int, ...]]


@lru_cache(maxsize=256)
def layout(traffic: Traffic, rank: int, n: int, total: int, elsize: int) -> Layout:
    """(send counts, send displacements, receive counts, receive displacements) of rank, in
    elements; total: the bytes each rank sends in the generated pattern."""
    send, sdispl = splits([b // elsize for b in traffic.sends(rank, n, total)])
    recv, rdispl = splits([b // elsize for b in traffic.receives(rank, n, total)])
    return tuple(send), tuple(sdispl), tuple(recv), tuple(rdispl)


class AllToAllV(Collective):
    name = "alltoallv"
    aliases = ("a2av",)
    in_place_checked = False
    exchange = True             # bytes per peer taken as all_to_all's, S/n: their mean over the peers
    modes = ("out",)          # no in-place all_to_all_single (nccl-tests checks none either)
    chunked = True            # busbw factor (n-1)/n
    irregular = True          # size is not count x element size x n

    def __init__(self, traffic: Optional[Traffic] = None) -> None:
        self.traffic = traffic or Traffic()

    @property
    def symmetric(self) -> bool:
        """A matrix gives ranks different loads: their times name no slow host."""
        return self.traffic.generated

    def total(self, ctx_count: int, elsize: int, n: int) -> int:
        return ctx_count * n * elsize if self.traffic.generated else 0

    def counts(self, count: int, elsize: int, n: int) -> Counts:
        param = align_down(count // n, elsize) if self.traffic.generated else 0
        send, recv = self.traffic.max_elements(n, param * n * elsize, elsize)
        return Counts(send, recv, param, 0, 0)

    def empty(self, c: Counts) -> bool:
        return c.send == 0 and c.recv == 0

    def bw_bytes(self, counts: Counts, elsize: int, n: int) -> int:
        return max(counts.send, counts.recv) * elsize

    def per_rank_bytes(self, counts: Counts, elsize: int, n: int) -> Optional[List[Tuple[int, int]]]:
        return self.traffic.per_rank(n, self.total(counts.param, elsize, n))

    def _layout(self, ctx: Ctx) -> Layout:
        size = ctx.dtype.size
        return layout(self.traffic, ctx.rank, ctx.n, self.total(ctx.count, size, ctx.n), size)

    def fill(self, send: Tensor, recv: Tensor, ctx: Ctx) -> None:
        """Block j of send holds what this rank sends rank j; recv holds poison."""
        recv.fill_(poison_value(ctx.dtype))
        counts, displs, _, _ = self._layout(ctx)
        for dst, (k, at) in enumerate(zip(counts, displs)):
            fill_chunks(send[at:at + k], partial(_to, ctx, dst))

    def expected(self, ctx: Ctx, start: int, stop: int) -> Optional[Tensor]:
        """Block src of recv: what rank src sends this rank; past the blocks, untouched poison."""
        import torch
        _, _, counts, displs = self._layout(ctx)
        ends = torch.tensor([a + k for a, k in zip(displs, counts)], dtype=torch.int64, device=ctx.device)
        starts = torch.tensor(list(displs) + [int(ends[-1])], dtype=torch.int64, device=ctx.device)
        k = index(ctx, start, stop)
        src = torch.searchsorted(ends, k, right=True)
        values = data_values(ctx, src.clamp(max=ctx.n - 1), k - starts[src], dst=ctx.rank)
        return torch.where(src < ctx.n, values, torch.full_like(values, poison_value(ctx.dtype)))

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        scounts, _, rcounts, _ = self._layout(ctx)
        return partial(dist.all_to_all_single, recv[:sum(rcounts)], send[:sum(scounts)],
                       output_split_sizes=list(rcounts), input_split_sizes=list(scounts),
                       async_op=async_op)

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: Ctx, nonblocking: bool) -> Call:
        scounts, sdispls, rcounts, rdispls = self._layout(ctx)
        fn = comm.Ialltoallv if nonblocking else comm.Alltoallv
        return partial(fn, [send.numpy(), (list(scounts), list(sdispls))],
                       [recv.numpy(), (list(rcounts), list(rdispls))])


def _to(ctx: Ctx, dst: int, start: int, stop: int) -> Tensor:
    """Elements start..stop of what this rank sends rank dst."""
    return data_values(ctx, ctx.rank, index(ctx, start, stop), dst=dst)


COLLECTIVE = AllToAllV()

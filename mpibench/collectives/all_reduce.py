"""all_reduce: every rank ends with the reduction of every rank's count elements."""
from functools import partial

from .base import Collective, fill_chunks, index, reduce_inputs, reduce_result


class AllReduce(Collective):
    name = "all_reduce"
    reduces = True
    modes = ("in",)           # torch.distributed.all_reduce works in place only

    def busbw_factor(self, n):
        return 2 * (n - 1) / n

    def fill(self, send, recv, ctx):
        import torch
        fill_chunks(torch, send, lambda a, b: reduce_inputs(torch, ctx, ctx.rank, index(torch, a, b, ctx.device)))

    def expected(self, ctx, start, stop):
        import torch
        return reduce_result(torch, ctx, index(torch, start, stop, ctx.device))

    def bind(self, dist, send, recv, ctx, async_op):
        return partial(dist.all_reduce, recv, op=ctx.torch_op, async_op=async_op)


COLLECTIVE = AllReduce()

"""reduce: the root receives the reduction of every rank's count elements."""
from functools import partial

from .base import Collective, fill_chunks, index, reduce_inputs, reduce_result


class Reduce(Collective):
    name = "reduce"
    reduces = True
    rooted = True
    modes = ("in",)           # torch.distributed.reduce works in place only

    def fill(self, send, recv, ctx):
        import torch
        fill_chunks(torch, send, lambda a, b: reduce_inputs(torch, ctx, ctx.rank, index(torch, a, b, ctx.device)))

    def expected(self, ctx, start, stop):
        import torch
        if ctx.rank != ctx.root:
            return None       # only the root's result is defined
        return reduce_result(torch, ctx, index(torch, start, stop, ctx.device))

    def bind(self, dist, send, recv, ctx, async_op):
        return partial(dist.reduce, recv, ctx.root, op=ctx.torch_op, async_op=async_op)


COLLECTIVE = Reduce()

"""gather: every rank's count elements reach the root, rank r's at chunk r
(nccl-tests' gather: all_gather's counts and busbw factor, one receiver)."""
from functools import partial

from .all_gather import AllGather


class Gather(AllGather):
    name = "gather"
    rooted = True
    torch_notes = dict.fromkeys((("nccl", "out"), ("nccl", "in")), (
        "torch copies the root's own chunk with copy_ (a separate CUDA copy beside its NCCL "
        "receives), where nccl-tests' root receives it from itself through NCCL"))

    def expected(self, ctx, start, stop):
        if ctx.rank != ctx.root:
            return None       # only the root receives
        return super().expected(ctx, start, stop)

    def bind(self, dist, send, recv, ctx, async_op):
        # The root's chunks: views made here, not in the timed loop. In place, this rank's
        # send view is its own chunk, as nccl-tests' in-place layout.
        chunks = list(recv.split(ctx.count)) if ctx.rank == ctx.root else None
        return partial(dist.gather, send, chunks, ctx.root, async_op=async_op)

    def bind_mpi(self, comm, send, recv, ctx, nonblocking):
        from mpi4py import MPI
        fn = comm.Igather if nonblocking else comm.Gather
        if ctx.rank != ctx.root:
            return partial(fn, send.numpy(), None, ctx.root)
        return partial(fn, MPI.IN_PLACE if ctx.in_place else send.numpy(), recv.numpy(), ctx.root)


COLLECTIVE = Gather()

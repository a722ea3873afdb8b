"""all_gather: every rank contributes count elements; every rank receives all n chunks."""
from functools import partial

from .base import Collective, Counts, align_down, data_values, index


class AllGather(Collective):
    name = "all_gather"
    chunked = True

    def counts(self, count, elsize, n):
        base = align_down(count // n, elsize)
        return Counts(base, base * n, base, base, 0)

    def expected(self, ctx, start, stop):
        k = index(ctx, start, stop)
        count = ctx.count
        return data_values(ctx, k // count, k % count)

    def bind(self, dist, send, recv, ctx, async_op):
        return partial(_all_gather(dist), recv, send, async_op=async_op)

    def bind_mpi(self, comm, send, recv, ctx, nonblocking):
        from mpi4py import MPI
        fn = comm.Iallgather if nonblocking else comm.Allgather
        # In place, this rank's chunk already sits at its place in recv.
        return partial(fn, MPI.IN_PLACE if ctx.in_place else send.numpy(), recv.numpy())


def _all_gather(dist):
    return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


COLLECTIVE = AllGather()

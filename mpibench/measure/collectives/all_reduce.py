"""all_reduce: every rank ends with the reduction of every rank's count elements."""
from functools import partial

from .base import Collective, index, reduce_result


class AllReduce(Collective):
    name = "all_reduce"
    reduces = True
    modes = ("in",)           # torch.distributed.all_reduce works in place only
    mpi_modes = ("out", "in")

    def busbw_factor(self, n):
        return 2 * (n - 1) / n

    def expected(self, ctx, start, stop):
        import torch
        return reduce_result(torch, ctx, index(ctx, start, stop))

    def bind(self, dist, send, recv, ctx, async_op):
        return partial(dist.all_reduce, recv, op=ctx.backend_op, async_op=async_op)

    def bind_mpi(self, comm, send, recv, ctx, nonblocking):
        from mpi4py import MPI
        fn = comm.Iallreduce if nonblocking else comm.Allreduce
        send = MPI.IN_PLACE if ctx.in_place else send.numpy()
        return partial(fn, send, recv.numpy(), ctx.backend_op)


COLLECTIVE = AllReduce()

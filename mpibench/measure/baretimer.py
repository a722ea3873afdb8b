"""A second timer for `verify`, sharing no code with the engine's loops (backends/timing.py):
a bare loop of in-place all_reduce calls on one buffer, timed alone (docs/verify.md says
why each part is as it is). Before each loop the MPI barrier mpibench's has (nccl-tests'
too): with more runnable processes than cores, a gloo loop after Open MPI's polling
barrier ran 1.4-1.9x slower than after gloo's sleeping one (4 MiB, 1 host x 2 ranks),
which is no matter of the timers.
"""
import time
from typing import Any, Callable


def torch_seconds(dist: Any, tensor: Any, iters: int, barrier: Callable[[], Any],
                  stream: Any = None) -> float:
    """Seconds per call of `iters` in-place all_reduce calls of tensor, after barrier();
    stream: the CUDA stream they run in (GPUs)."""
    if not tensor.is_cuda:
        barrier()
        t0 = time.monotonic_ns()
        for _ in range(iters):
            dist.all_reduce(tensor)
        return (time.monotonic_ns() - t0) * 1e-9 / iters
    import torch
    with torch.cuda.stream(stream):
        barrier()
        torch.cuda.synchronize(tensor.device)
        t0 = time.monotonic_ns()
        for _ in range(iters):
            dist.all_reduce(tensor)
        torch.cuda.synchronize(tensor.device)
        return (time.monotonic_ns() - t0) * 1e-9 / iters


def mpi_seconds(MPI: Any, comm: Any, array: Any, iters: int) -> float:
    """Seconds per call of `iters` in-place MPI_Allreduce calls of array."""
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        comm.Allreduce(MPI.IN_PLACE, array)
    return float(MPI.Wtime() - t0) / iters

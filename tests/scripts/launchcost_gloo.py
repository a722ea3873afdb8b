"""launchcost.per_call_seconds on a real gloo group across mpirun ranks.

Each rank prints one line: rank, the launch cost of an async all_reduce, the launch cost
of the same call after a 2 ms host delay, whether every Work completed, the tensor's
value after the calls, of_backend's figure for a gloo backend, and of_collective's for
every collective (name=seconds). MASTER_ADDR/MASTER_PORT must be set by the caller.
"""
import os
import time
from types import SimpleNamespace

import torch
import torch.distributed as dist

from mpibench.measure.backends.torchdist import TorchBackend
from mpibench.measure.collectives import REGISTRY
from mpibench.measure.launchcost import of_backend, of_collective, per_call_seconds, wait_all

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("gloo", rank=rank, world_size=size)
x = torch.full((1,), float(rank + 1))
dist.all_reduce(x, op=dist.ReduceOp.MAX)        # first use: connections made here
works = []


def call():
    w = dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True)
    works.append(w)
    return w


def slow_call():
    time.sleep(0.002)
    return dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True)


fast = per_call_seconds(call, 100, wait_all)
done = all(w.is_completed() for w in works)
slow = per_call_seconds(slow_call, 20, wait_all)
cpu = TorchBackend(SimpleNamespace(backend="gloo", device=torch.device("cpu"), rank=rank))
backend = of_backend(cpu, dist.barrier, 50)
each = " ".join(f"{name}={of_collective(cpu, coll, dist.barrier, size - 1, 50):.9f}"
                for name, coll in REGISTRY.items())
print(f"rank={rank} fast={fast:.9f} slow={slow:.9f} completed={done} value={x.item()} "
      f"backend={backend:.9f} {each}", flush=True)
dist.destroy_process_group()

"""Per-host process groups cost one group-creating call per rank however many hosts there
are (measure/groups.py): on real gloo under a real mpirun, 4 ranks split into 2 and into 4
'hosts', counting the calls into torch's _new_process_group_helper (each of which, with a
bound device on NCCL, is an ncclCommSplit over the whole job) and checking each group sums
its own ranks."""
import json
import os

import pytest

from conftest import MPIRUN, PYTHON, run, show

pytestmark = pytest.mark.usefixtures("procs")

SCRIPT = r"""
import json, socket
from mpi4py import MPI
import torch, torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from mpibench.measure.groups import can_split, part_group

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
port = None
if rank == 0:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
port = comm.bcast(port)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
made = []
helper = c10d._new_process_group_helper
def counted(*a, **k):
    made.append(1)
    return helper(*a, **k)
c10d._new_process_group_helper = counted
out = {"can_split": can_split(dist, torch.device("cpu"))}
for hosts in (2, 4):
    parts = {f"h{h}": [r for r in range(size) if r * hosts // size == h] for h in range(hosts)}
    before = len(made)
    old = [dist.new_group(m) for m in parts.values()]          # a group per host, every rank
    calls_old = len(made) - before
    before = len(made)
    group = part_group(dist, None, parts, rank)
    calls_new = len(made) - before
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=group)
    mine = next(m for m in parts.values() if rank in m)
    out[hosts] = {"old": calls_old, "new": calls_new, "sum": t.item(), "want": float(sum(mine))}
print("GROUPS " + json.dumps(out), flush=True)
dist.destroy_process_group()
"""


def test_host_groups_take_one_call_however_many_hosts():
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done = run([MPIRUN, *root, "--oversubscribe", "-np", "4", PYTHON, "-c", SCRIPT], timeout=120)
    assert done.returncode == 0, show(done)
    seen = [json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
            if line.startswith("GROUPS ")]
    assert len(seen) == 4, show(done)
    for out in seen:
        assert out["can_split"] is False          # gloo: no split, each rank makes its own
        for hosts in ("2", "4"):
            assert out[hosts]["new"] == 1, out
            assert out[hosts]["sum"] == out[hosts]["want"], out
        # new_group per host: one call per host on every rank, what NCCL pays a split for
        assert (out["2"]["old"], out["4"]["old"]) == (2, 4), out

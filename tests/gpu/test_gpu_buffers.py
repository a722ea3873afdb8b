"""On CUDA GPUs, one or more: the buffers (-G's allocator, the room left for NCCL, the data the
timed loops move), the launch cost of each collective, --mode, and the notes on torch's calls.

Run with `python -m pytest -q tests/gpu` on a machine with a GPU; one rank per GPU under a
real mpirun (NCCL at world size 1 runs every collective but sendrecv, which needs two).
"""
import json
import re

import pytest

from conftest import mpirun, show
from gpu_helpers import ask_torch, gpu_count, needs

NP = gpu_count()
pytestmark = [needs(1), pytest.mark.usefixtures("procs")]

SMALL = ["-b", "8", "-e", "64K", "-f", "32", "-n", "5", "-w", "1", "--probe-iters", "2"]
ALL = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
       "gather", "scatter", "alltoallv"} | ({"sendrecv"} if NP >= 2 else set())


def gpus(args, env=None, timeout=600):
    return mpirun(NP, ["run", "--backend", "nccl"] + args, env=env, timeout=timeout)


def _modes(rows):
    return [(r["collective"], r[m]) for r in rows for m in ("out_of_place", "in_place") if r[m]]


def test_each_collective_has_its_launch_cost_and_the_loops_move_data(tmp_path):
    """Every collective's own launch cost, each row marked against it; the notes on
    broadcast, gather and scatter; no timed loop on buffers of zeros (the loop trace)."""
    out = tmp_path / "r.json"
    done = gpus(["--collectives", "all", "--json", str(out)] + SMALL,
                env={"MPIBENCH_TRACE_LOOPS": "1"})
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    cost = doc["launch_cost_us"]["nccl"]
    assert set(cost) == ALL and all(c > 0 for c in cost.values()), cost
    assert re.search(r"^# launch cost \(nccl\), us per call, .*: all_reduce [0-9.]+, ", done.stdout, re.M)
    for coll, m in _modes(doc["results"]):
        assert m["nwrong"] == 0, (coll, m)
        assert m["launch_bound"] == (m["time_us"] <= 1.5 * cost[coll]), (coll, m)
    notes = {(n["collective"]) for n in doc["call_notes"]}
    assert notes == {"broadcast", "gather", "scatter"}, doc["call_notes"]
    assert "# gather (nccl): torch copies the root's own chunk with copy_" in done.stdout
    zeros = re.findall(r"^looptrace rank \d+: .*: views (\d+) all-zero (\d+)$", done.stderr, re.M)
    assert zeros and all(z == "0" for _, z in zeros), zeros


def test_graph_buffers_and_no_launch_bound_rows_with_graphs(tmp_path):
    """-G: buffers from NCCL's allocator where torch offers it (else torch's, said so), no
    registration claimed that nothing checked, every collective checked through a graph, no
    row marked launch-bound."""
    out = tmp_path / "g.json"
    done = gpus(["--collectives", "all", "-G", "2", "-c", "1", "--json", str(out)] + SMALL)
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    buffers = doc["graph_buffers"]["nccl"]
    assert re.search(r"^# -G buffers \(nccl\): (ncclMemAlloc .*whether it did is not checked|"
                     r"torch's caching allocator)", done.stdout, re.M), show(done)
    assert buffers["registered"] is None, buffers
    assert "no row is marked launch-bound" in done.stdout, show(done)
    for coll, m in _modes(doc["results"]):
        assert m["nwrong"] == 0 and "launch_bound" not in m, (coll, m)
    assert "Launch-bound rows" not in done.stdout


def test_maxbytes_is_lowered_to_leave_nccl_its_room(tmp_path):
    """-e 1T cannot fit: the header says to what -e was lowered, leaving nccl-tests' reserve
    of the GPU's memory; the rows stop there and nothing runs out of memory."""
    out = tmp_path / "m.json"
    done = gpus(["--collectives", "all_to_all", "-b", "1M", "-e", "1T", "-f", "1024", "-n", "2",
                 "-w", "0", "-c", "0", "--probe-iters", "0", "--json", str(out)])
    assert done.returncode == 0, show(done)
    room = json.loads(out.read_text())["device_memory"]["nccl"]
    total = int(ask_torch("print(min(torch.cuda.get_device_properties(i).total_memory "
                          "for i in range(torch.cuda.device_count())))"))
    gib = 1 << 30
    assert room["device_bytes"] == total
    assert room["reserve_bytes"] == min(-(-total // (16 * gib)), 4) * gib + gib
    assert room["maxbytes"] == 1 << 40 and room["lowered_to"] == 1 << 30, room
    assert "# device memory (nccl): -e lowered from 1 TiB to 1 GiB" in done.stdout, show(done)
    assert "out of memory" not in done.stdout, show(done)


@pytest.mark.parametrize("mode", ["in", "out"])
def test_one_mode_every_collective(tmp_path, mode):
    out = tmp_path / "mode.json"
    done = gpus(["--collectives", "all", "--mode", mode, "--json", str(out)] + SMALL)
    assert done.returncode == 0, show(done)
    key = {"in": "in_place", "out": "out_of_place"}[mode]
    rows = json.loads(out.read_text())["results"]
    assert rows and all(r[key]["nwrong"] == 0 for r in rows), rows

"""The NCCL path on a real CUDA GPU; skipped where torch sees none (CI has none).

Run on a GPU machine with `python -m pytest -q tests/gpu`. NCCL refuses two ranks on
one GPU, so with a single GPU these run one rank: lone, and under mpirun -np 1. The
1 GiB test needs about 4 GiB of GPU memory.
"""
import json
import subprocess

import pytest

from conftest import PYTHON, base_env, lone, mpirun, show

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU visible to torch")

SMALL = ["-b", "8", "-e", "4M", "-f", "4", "-n", "5", "-w", "2"]


def _rows(path):
    return json.loads(path.read_text())["results"]


@pytest.mark.parametrize("launch", ["lone", "mpirun"])
def test_every_collective_checks_clean_on_nccl(tmp_path, launch):
    out = tmp_path / "r.json"
    args = ["run", "--backend", "nccl", "-d", "float32,bfloat16,float16", "-c", "1",
            "--json", str(out)] + SMALL
    done = lone(args, timeout=600) if launch == "lone" else mpirun(1, args, timeout=600)
    assert done.returncode == 0, show(done)
    rows = _rows(out)
    assert {r["collective"] for r in rows} >= {"all_reduce", "all_gather", "reduce_scatter",
                                               "broadcast", "reduce", "all_to_all"}
    assert {r["dtype"] for r in rows} == {"float32", "bfloat16", "float16"}
    for r in rows:
        for mode in ("out_of_place", "in_place"):
            if r[mode]:
                assert r[mode]["nwrong"] == 0, r
                assert r[mode]["time_us"] > 0, r


@pytest.mark.parametrize("extra", [["-z", "0"], ["-z", "1"], ["-z", "2"], ["-z", "3"], ["-G", "3"]])
def test_blocking_modes_and_cuda_graphs(tmp_path, extra):
    out = tmp_path / "r.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all_reduce,all_gather",
                 "--json", str(out)] + SMALL + extra, timeout=600)
    assert done.returncode == 0, show(done)
    assert all(r[m]["nwrong"] == 0 for r in _rows(out) for m in ("out_of_place", "in_place") if r[m])


def test_per_iteration_events_agree_with_the_row(tmp_path):
    """-I 1 on a GPU: CUDA events between the iterations; every iteration has a time, and
    at 64 MiB (GPU-bound, -z 0) their mean is the row's host-clock time within 5%."""
    out = tmp_path / "r.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "64M", "-e", "64M", "-n", "50", "-w", "5", "-c", "0", "-z", "0",
                 "-I", "1", "--probe-iters", "0", "--json", str(out)], timeout=600)
    assert done.returncode == 0, show(done)
    assert "# per-iteration report: CUDA events" in done.stdout, show(done)
    m = _rows(out)[0]["out_of_place"]
    p = m["per_iter"]
    assert len(p["times_us"]) == 50 and all(t > 0 for t in p["times_us"])
    assert p["avg_us"] == pytest.approx(m["time_us"], rel=0.05), (p["avg_us"], m["time_us"])


def test_device_line_names_the_gpu():
    done = lone(["info", "--backend", "nccl"], timeout=300)
    assert done.returncode == 0, show(done)
    assert "cuda:0" in done.stdout and "nccl" in done.stdout, show(done)


@pytest.mark.parametrize("command", [
    ["allreduce", "--payload", "64M", "--trials", "3"],
    ["latency", "-s", "64M", "-k", "100"],
    ["flagsync", "-n", "100"],
    ["demo"],
    ["doctor"],
])
def test_classic_and_diagnosis_commands_run_on_the_gpu(command):
    done = lone(command + ["--backend", "nccl"] if command[0] != "doctor" else command, timeout=600)
    assert done.returncode == 0, show(done)


# ---- what would have caught a timer that stops before the GPU has finished ----

GIB = 1 << 30


def _memory_bandwidth():
    """The device's memory bandwidth in GB/s as a copy sees it: a 1 GiB copy reads and
    writes 1 GiB each (best of 5, timed with CUDA events)."""
    src = torch.empty(GIB, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    best = None
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        t = start.elapsed_time(end) / 1e3
        best = t if best is None else min(best, t)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * GIB / best / 1e9


def _out_of_place_algbw(tmp_path, z):
    out = tmp_path / f"z{z}.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "1G", "-e", "1G", "-n", "20", "-w", "5", "-c", "0", "-z", str(z),
                 "--probe-iters", "0", "--json", str(out)], timeout=600)
    assert done.returncode == 0, show(done)
    (row,) = _rows(out)
    return row["out_of_place"]["algbw_GBps"]


def test_z0_times_the_transfer_not_the_launches(tmp_path):
    """1 GiB all_gather out of place: -z 0 (launch all, wait once) reads no faster than the
    device's memory and within 5% of -z 2 (wait after each)."""
    z0, z2 = _out_of_place_algbw(tmp_path, 0), _out_of_place_algbw(tmp_path, 2)
    assert z0 <= _memory_bandwidth(), (z0, z2)
    assert abs(z0 - z2) <= 0.05 * z2, (z0, z2)


@pytest.mark.parametrize("graphs", [1, 5])
@pytest.mark.parametrize("warmup", [0, 5])
def test_cuda_graphs_check_clean_for_every_collective(tmp_path, graphs, warmup):
    """-G captures after the untimed first call (also with -w 0) and checks clean."""
    out = tmp_path / "g.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all", "-b", "8", "-e", "4M",
                 "-f", "64", "-n", "5", "-w", str(warmup), "-c", "1", "-G", str(graphs),
                 "--json", str(out)], timeout=600)
    assert done.returncode == 0, show(done)
    rows = _rows(out)
    assert {r["collective"] for r in rows} >= {"all_reduce", "all_gather", "reduce_scatter",
                                               "broadcast", "reduce", "all_to_all", "gather",
                                               "scatter"}
    assert all(r[m]["nwrong"] == 0 for r in rows for m in ("out_of_place", "in_place") if r[m])


BARE = r"""
import json, sys, torch, torch.distributed as dist
store = dist.FileStore(sys.argv[1], 1)
dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                        device_id=torch.device("cuda:0"))
out = {}
for size in (64 << 20, 256 << 20):
    send = torch.ones(size // 4, device="cuda")
    recv = torch.empty_like(send)
    for _ in range(5):
        dist.all_gather_into_tensor(recv, send)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        dist.all_gather_into_tensor(recv, send)
    end.record()
    end.synchronize()
    out[size] = start.elapsed_time(end) * 1e3 / 50
    del send, recv
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_mpibench_agrees_with_a_bare_torch_loop(tmp_path):
    """At 64 MiB and up, mpibench's time per all_gather (the host's clock from the first
    launch to the stream's end, as nccl-tests) is a bare loop's CUDA-event time within 2%."""
    bare = subprocess.run([PYTHON, "-c", BARE, str(tmp_path / "store")], capture_output=True,
                          text=True, timeout=600, env=base_env())
    assert bare.returncode == 0, bare.stderr
    bare_us = {int(k): v for k, v in json.loads(bare.stdout.strip().splitlines()[-1]).items()}
    out = tmp_path / "m.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "64M", "-e", "256M", "-f", "4", "-n", "50", "-w", "5", "-c", "0",
                 "-z", "0", "--probe-iters", "0", "--json", str(out)], timeout=600)
    assert done.returncode == 0, show(done)
    ours = {r["size"]: r["out_of_place"]["time_us"] for r in _rows(out)}
    assert set(ours) == set(bare_us), (ours, bare_us)
    for size, t in ours.items():
        assert abs(t - bare_us[size]) <= 0.02 * bare_us[size], (size, t, bare_us[size])

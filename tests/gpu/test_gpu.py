"""The NCCL path on real CUDA GPUs; skipped, with the reason, where torch sees fewer than two.

Run on a GPU machine with `python -m pytest -q tests/gpu`. Every test runs as many ranks as
there are GPUs (torch.cuda.device_count(), one per GPU: NCCL refuses two ranks on one GPU)
under a real mpirun: one-rank NCCL is a local copy, not communication. The 1 GiB tests
need about 4 GiB of memory per GPU; the two-host test needs 4 GPUs and root.
"""
import ctypes
import glob
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import MPIRUN, PYTHON, ROOT, base_env, mpirun, run, show

torch = pytest.importorskip("torch")
NP = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(
    NP < 2, reason=(f"needs 2 or more CUDA GPUs, torch sees {NP}: one-rank NCCL is a local "
                    f"copy, not communication" if torch.cuda.is_available()
                    else "no CUDA GPU visible to torch"))

SMALL = ["-b", "8", "-e", "4M", "-f", "4", "-n", "5", "-w", "2"]
COLLECTIVES = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
               "all_to_all", "gather", "scatter", "sendrecv"}
GIB = 1 << 30


def gpus(args, env=None, timeout=600):
    """mpibench ARGS on every GPU of this machine, one rank each, under mpirun."""
    return mpirun(NP, args, env=env, timeout=timeout)


def _doc(path):
    return json.loads(path.read_text())


def _modes(rows):
    return [r[m] for r in rows for m in ("out_of_place", "in_place") if r[m]]


# ---- run --------------------------------------------------------------------------
def test_every_collective_checks_clean(tmp_path):
    out = tmp_path / "r.json"
    done = gpus(["run", "--backend", "nccl", "-d", "float32,bfloat16,float16", "-c", "1",
                 "--json", str(out)] + SMALL)
    assert done.returncode == 0, show(done)
    rows = _doc(out)["results"]
    assert {r["collective"] for r in rows} == COLLECTIVES
    assert {r["dtype"] for r in rows} == {"float32", "bfloat16", "float16"}
    assert all(m["nwrong"] == 0 and m["time_us"] > 0 for m in _modes(rows))


@pytest.mark.parametrize("extra", [["-z", "0"], ["-z", "1"], ["-z", "2"], ["-z", "3"]])
def test_blocking_modes(tmp_path, extra):
    out = tmp_path / "r.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all", "--json", str(out)]
                + SMALL + extra)
    assert done.returncode == 0, show(done)
    assert all(m["nwrong"] == 0 for m in _modes(_doc(out)["results"]))


@pytest.mark.parametrize("graphs", [1, 5])
@pytest.mark.parametrize("warmup", [0, 5])
def test_cuda_graphs_check_clean_for_every_collective(tmp_path, graphs, warmup):
    """-G captures after the untimed first call (also with -w 0) and checks clean."""
    out = tmp_path / "g.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all", "-b", "8", "-e", "4M",
                 "-f", "64", "-n", "5", "-w", str(warmup), "-c", "1", "-G", str(graphs),
                 "--json", str(out)])
    assert done.returncode == 0, show(done)
    rows = _doc(out)["results"]
    assert {r["collective"] for r in rows} == COLLECTIVES
    assert all(m["nwrong"] == 0 for m in _modes(rows))


def test_the_graph_check_counts_what_a_replay_wrote(tmp_path):
    """The switch adds 1 to rank 0's first received element inside the check's graph only:
    with -G the check counts it (one wrong element per row and mode, exit 1); without -G
    there is no graph and nothing is wrong."""
    base = ["run", "--backend", "nccl", "--collectives", "all_reduce", "-b", "1M", "-e", "1M",
            "-n", "3", "-w", "1", "-c", "1", "--probe-iters", "0"]
    fault = {"MPIBENCH_FAULT": "graphcorrupt:0"}
    out = tmp_path / "g.json"
    done = gpus(base + ["-G", "2", "--json", str(out)], env=fault)
    assert done.returncode == 1, show(done)
    assert [m["nwrong"] for m in _modes(_doc(out)["results"])] == [1, 1], show(done)
    done = gpus(base + ["--json", str(tmp_path / "e.json")], env=fault)
    assert done.returncode == 0, show(done)


def test_per_iteration_events_agree_with_the_row(tmp_path):
    """-I 1: CUDA events between the iterations, created before the loop; every iteration
    has a time, and at 64 MiB (-z 0) their mean is the row's host-clock time within 5%."""
    out = tmp_path / "r.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "64M", "-e", "64M", "-n", "50", "-w", "5", "-c", "0", "-z", "0",
                 "-I", "1", "--probe-iters", "0", "--json", str(out)])
    assert done.returncode == 0, show(done)
    assert "# per-iteration report: CUDA events" in done.stdout, show(done)
    m = _doc(out)["results"][0]["out_of_place"]
    p = m["per_iter"]
    assert len(p["times_us"]) == 50 and all(t > 0 for t in p["times_us"])
    assert p["avg_us"] == pytest.approx(m["time_us"], rel=0.05), (p["avg_us"], m["time_us"])


def test_launch_cost_in_the_header_and_launch_bound_rows(tmp_path):
    out = tmp_path / "r.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all_reduce", "-b", "8",
                 "-e", "64M", "-f", "8", "--json", str(out)])
    assert done.returncode == 0, show(done)
    m = re.search(r"^# launch cost \(nccl\): ([0-9.]+) us per call", done.stdout, re.M)
    assert m and float(m.group(1)) > 0, show(done)
    doc = _doc(out)
    cost = doc["launch_cost_us"]["nccl"]
    assert cost == pytest.approx(float(m.group(1)), abs=0.06)
    for row in doc["results"]:
        for mode in ("out_of_place", "in_place"):
            assert row[mode]["launch_bound"] == (row[mode]["time_us"] <= 1.5 * cost), row
    if any(x["launch_bound"] for x in _modes(doc["results"])):
        assert "# Launch-bound rows" in done.stdout, show(done)
    big = doc["results"][-1]
    assert not big["out_of_place"]["launch_bound"], big     # 64 MiB is not launch-bound


def test_memory_line_reports_device_memory(tmp_path):
    out = tmp_path / "r.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all_gather", "-b", "256M",
                 "-e", "256M", "-n", "3", "-w", "1", "--json", str(out)])
    assert done.returncode == 0, show(done)
    assert "# peak device memory (torch.cuda.max_memory_allocated): " in done.stdout, show(done)
    for m in _doc(out)["memory"]:
        assert m["device_peak_bytes"] >= m["buffer_bytes"] > 0, m


def test_blocking_wait_is_named_in_the_header(tmp_path):
    done = gpus(["run", "--backend", "nccl", "--collectives", "sendrecv", "-z", "0"] + SMALL,
                env={"TORCH_NCCL_BLOCKING_WAIT": "1"})
    assert done.returncode == 0, show(done)
    assert "# TORCH_NCCL_BLOCKING_WAIT=1: point-to-point waits block the host" in done.stdout


def test_the_backend_stream_is_non_blocking():
    """torch's pool streams, which the backend uses, are created cudaStreamNonBlocking (1),
    as nccl-tests' stream: asked of the CUDA runtime itself."""
    libs = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart*.so*"))
                  + glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia",
                                           "cuda_runtime", "lib", "libcudart.so*")))
    if not libs:
        pytest.skip("no libcudart next to torch to ask")
    cudart = ctypes.CDLL(libs[0])
    stream = torch.cuda.Stream()
    flags = ctypes.c_uint(99)
    assert cudart.cudaStreamGetFlags(ctypes.c_void_p(stream.cuda_stream), ctypes.byref(flags)) == 0
    assert flags.value == 1, flags.value


# ---- a timer that stops before the GPU has finished must fail these --------------
def _memory_bandwidth():
    """The device's memory rate in GB/s as a copy sees it, counting the bytes read and the
    bytes written (a 1 GiB copy moves 2 GiB; best of 5, CUDA events)."""
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


def _all_gather_seconds(tmp_path, z):
    out = tmp_path / f"z{z}.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "1G", "-e", "1G", "-n", "20", "-w", "5", "-c", "0", "-z", str(z),
                 "--probe-iters", "0", "--json", str(out)])
    assert done.returncode == 0, show(done)
    (row,) = _doc(out)["results"]
    return row["size"], row["out_of_place"]["time_us"] / 1e6


def test_z0_times_the_transfer_not_the_launches(tmp_path):
    """1 GiB all_gather out of place. Each rank writes the whole output (S bytes) and reads
    its own part (S/n) in its memory at least: those bytes over -z 0's time stay under the
    memory's read+write rate; -z 0 (launch all, wait once) is -z 2 (wait after each) within
    5%. A -z 0 timer stopping 2x early fails the second."""
    size, z0 = _all_gather_seconds(tmp_path, 0)
    _, z2 = _all_gather_seconds(tmp_path, 2)
    moved = size + size / NP
    assert moved / z0 / 1e9 <= _memory_bandwidth(), (z0, z2)
    assert abs(z0 - z2) <= 0.05 * z2, (z0, z2)
    assert abs(z0 / 2 - z2) > 0.05 * z2       # the check's power, on these figures


BARE = r"""
import json, os, sys, torch, torch.distributed as dist
rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method="file://" + sys.argv[1], rank=rank,
                        world_size=size, device_id=torch.device("cuda", rank))
out = {}
for total in (64 << 20, 256 << 20):
    send = torch.ones(total // 4 // size, device="cuda")
    recv = torch.empty(total // 4 // size * size, device="cuda")
    for _ in range(5):
        dist.all_gather_into_tensor(recv, send)
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        dist.all_gather_into_tensor(recv, send)
    end.record()
    end.synchronize()
    out[recv.numel() * 4] = start.elapsed_time(end) * 1e3 / 50
    del send, recv
dist.destroy_process_group()
if rank == 0:
    print(json.dumps(out))
"""


def test_mpibench_agrees_with_a_bare_torch_loop(tmp_path):
    """At 64 MiB and up, on every GPU, mpibench's time per all_gather (the host's clock from
    the first launch to the stream's end, as nccl-tests) is a bare loop's CUDA-event time
    within 3%: a timer off by 2x, in any -z mode's common code, fails here."""
    script = tmp_path / "bare.py"
    script.write_text(BARE)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    bare = run([MPIRUN, *root, "-np", str(NP), PYTHON, str(script), str(tmp_path / "store")],
               timeout=600)
    assert bare.returncode == 0, show(bare)
    bare_us = {int(k): v for k, v in json.loads(bare.stdout.strip().splitlines()[-1]).items()}
    out = tmp_path / "m.json"
    done = gpus(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                 "-b", "64M", "-e", "256M", "-f", "4", "-n", "50", "-w", "5", "-c", "0",
                 "-z", "0", "--probe-iters", "0", "-a", "3", "--json", str(out)])
    assert done.returncode == 0, show(done)
    ours = {r["size"]: r["out_of_place"]["time_us"] for r in _doc(out)["results"]}
    assert set(ours) == set(bare_us), (ours, bare_us)
    for size, t in ours.items():
        assert abs(t - bare_us[size]) <= 0.03 * bare_us[size], (size, t, bare_us[size])


# ---- the other commands ------------------------------------------------------------
def test_info_names_every_gpu():
    done = gpus(["info", "--backend", "nccl"], timeout=300)
    assert done.returncode == 0, show(done)
    for k in range(NP):
        assert f"cuda:{k}" in done.stdout, show(done)


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "reduce_scatter",
                                        "all_to_all"])
def test_check(collective):
    done = gpus(["check", "--backend", "nccl", "--collectives", collective, "-b", "64M",
                 "-n", "3", "-w", "1"])
    assert done.returncode == 0, show(done)
    assert "# every host passed (1)" in done.stdout, show(done)


def test_p2p(tmp_path):
    out = tmp_path / "p.json"
    done = gpus(["p2p", "--backend", "nccl", "--every-rank", "-b", "64M", "-n", "3",
                 "--latency-iters", "5", "--json", str(out)])
    assert done.returncode == 0, show(done)
    m = _doc(out)["p2p"]["bandwidth_GBps"]
    assert all(m[i][j] > 0 for i in range(NP) for j in range(NP) if i != j)


def test_train_tiny(tmp_path):
    out = tmp_path / "t.json"
    done = gpus(["train", "--backend", "nccl", "--preset", "tiny", "--steps", "2",
                 "--warmup", "1", "--alone-iters", "2", "--json", str(out)])
    assert done.returncode == 0, show(done)
    t = _doc(out)["train"]
    assert t["precision"] == "bf16 autocast"
    assert t["replicas"]["agree"] is True and t["replicas"]["rtol"] == 0.01, t["replicas"]


def test_doctor_names_the_transport_nccl_used():
    done = gpus(["doctor"])
    assert done.returncode == 0, show(done)
    section = done.stdout.split("# NCCL transports")[1].split("# findings")[0]
    assert "not checked" not in section and "FAILED TO RUN" not in section, show(done)
    assert re.search(r"^#   \S+ \(inside\): \S+", section, re.M), show(done)


@pytest.mark.parametrize("command", [
    ["allreduce", "-b", "64M", "-n", "3"],
    ["latency", "-b", "64M", "-k", "100"],
    ["flagsync", "-n", "100"],
    ["demo"],
])
def test_classic_commands(command):
    done = gpus(command + ["--backend", "nccl"])
    assert done.returncode == 0, show(done)


# ---- two hosts on one machine: NCCL's host hash is the hostname ----------------------
def test_two_namespace_hosts_of_two_gpus(tmp_path):
    """launch/fakecluster.py --hosts 2 --ppn 2: NCCL sees two hosts (inter-host transport),
    check runs its per-host and pair rounds, run prints its per-host table. h2's ranks
    get GPUs 2 and 3."""
    if NP < 4:
        pytest.skip(f"needs 4 GPUs, torch sees {NP}")
    if os.geteuid() != 0:
        pytest.skip("namespace hosts need root")
    out = tmp_path / "r.json"
    rank = ('if [ "$(hostname)" = h2 ]; then export CUDA_VISIBLE_DEVICES=2,3; fi; '
            f'exec {PYTHON} -m mpibench "$@"')
    for args in (["run", "--backend", "nccl", "--collectives", "all_reduce,all_gather",
                  "-b", "1M", "-e", "64M", "-f", "8", "--json", str(out)],
                 ["check", "--backend", "nccl", "-b", "64M", "-n", "3", "-w", "1"],
                 ["doctor"]):
        done = subprocess.run([PYTHON, os.path.join(ROOT, "launch", "fakecluster.py"),
                               "--hosts", "2", "--ppn", "2", "--", "sh", "-c", rank, "rank",
                               *args], capture_output=True, text=True, timeout=600,
                              env=base_env({"PYTHONPATH": ROOT}))
        assert done.returncode == 0, show(done)
        if args[0] == "run":
            assert "h1" in done.stdout and "h2" in done.stdout, show(done)
            assert all(m["nwrong"] == 0 for m in _modes(_doc(out)["results"]))
        if args[0] == "check":
            assert "# every host passed (2)" in done.stdout, show(done)
        if args[0] == "doctor":
            assert re.search(r"^#   h1 <-> h2: \S+", done.stdout, re.M), show(done)

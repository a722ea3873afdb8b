"""The NCCL path across two or more CUDA GPUs: communication, bandwidth and transports;
skipped, with the reason, where torch sees fewer than two (tests/gpu/test_gpu_one.py
covers what one GPU can show).

Run on a GPU machine with `python -m pytest -q tests/gpu`. Every test runs as many ranks as
there are GPUs (torch.cuda.device_count(), one per GPU) under a real mpirun. The 1 GiB
tests need about 4 GiB of memory per GPU; the two-host test needs 4 GPUs and root.
"""
import json
import os
import re
import subprocess

import pytest

from conftest import MPIRUN, PYTHON, ROOT, base_env, run, show
from conftest import check_usage_error
from gpu_helpers import (COLLECTIVES, ask_torch, checked_run, doc, gpu_count, graph_args, measured,
                         needs)
from gpu_helpers import gpus as on_gpus

NP = gpu_count()
pytestmark = [needs(2), pytest.mark.usefixtures("procs")]

SMALL = ["-b", "8", "-e", "4M", "-f", "4", "-n", "5", "-w", "2"]
GIB = 1 << 30


def gpus(args, env=None, timeout=600):
    """mpibench ARGS on every GPU of this machine, one rank each, under mpirun."""
    return on_gpus(NP, args, env=env, timeout=timeout)


_doc = doc


# ---- run --------------------------------------------------------------------------
def test_every_collective_checks_clean(tmp_path):
    rows = checked_run(NP, COLLECTIVES, ["-d", "float32,bfloat16,float16"] + SMALL,
                       tmp_path / "r.json")
    assert {r["dtype"] for r in rows} == {"float32", "bfloat16", "float16"}
    assert all(m["time_us"] > 0 for m in measured(rows))


@pytest.mark.parametrize("z", ["0", "1", "2", "3"])
def test_blocking_modes(tmp_path, z):
    checked_run(NP, COLLECTIVES, ["-z", z] + SMALL, tmp_path / "r.json")


@pytest.mark.parametrize("graphs", [1, 5])
@pytest.mark.parametrize("warmup", [0, 5])
def test_cuda_graphs_check_clean_for_every_collective(tmp_path, graphs, warmup):
    checked_run(NP, COLLECTIVES, graph_args(graphs, warmup), tmp_path / "g.json")


@pytest.mark.parametrize("name", ["TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"])
def test_blocking_wait_with_sendrecv(tmp_path, name):
    """A blocking wait (either name torch reads): the header says so and sendrecv's waits
    end and check clean; with -G the capture is refused in one line, exit 2, as wait()
    would poll an event recorded during the capture (cudaErrorCapturedEvent)."""
    out = tmp_path / "r.json"
    args = ["run", "--backend", "nccl", "--collectives", "sendrecv", "-z", "0", "-c", "1"]
    done = gpus(args + ["--json", str(out)] + SMALL, env={name: "1"})
    assert done.returncode == 0, show(done)
    assert f"# {name}=1: point-to-point waits block the host" in done.stdout
    assert all(m["nwrong"] == 0 for m in measured(_doc(out)["results"]))
    done = gpus(args + ["-G", "2"] + SMALL, env={name: "1"})
    check_usage_error(done, f"-G cannot capture sendrecv with {name}=1", 300)


def test_ranks_bound_to_their_own_gpu_run(tmp_path):
    """A per-rank CUDA_VISIBLE_DEVICES wrapper (as srun --gpus-per-task=1 makes): every
    rank sees one GPU, its local rank goes up to NP-1, and each takes device 0 of its own."""
    out = tmp_path / "r.json"
    wrapper = tmp_path / "bind.sh"
    wrapper.write_text('#!/bin/sh\nexport CUDA_VISIBLE_DEVICES="$OMPI_COMM_WORLD_LOCAL_RANK"\n'
                       f'exec {PYTHON} -m mpibench "$@"\n')
    wrapper.chmod(0o755)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done = run([MPIRUN, *root, "-np", str(NP), str(wrapper), "run", "--backend", "nccl",
                "--collectives", "all_reduce", "-b", "1M", "-e", "1M", "-c", "1",
                "--json", str(out)], env={"PYTHONPATH": ROOT}, timeout=600)
    assert done.returncode == 0, show(done)
    devices = _doc(out)["config"]["devices"]
    assert [d["device"] for d in devices] == ["cuda:0"] * NP
    assert len({d["bus_id"] for d in devices}) == NP, devices


# ---- a timer that stops before the GPU has finished must fail these --------------
def _memory_bandwidth():
    """The device's memory rate in GB/s as a copy sees it, counting the bytes read and the
    bytes written (a 1 GiB copy moves 2 GiB; best of 5, CUDA events), in a child process."""
    return 2 * GIB / (float(ask_torch(COPY)) / 1e3) / 1e9


COPY = f"""
src = torch.empty({GIB}, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
best = None
for _ in range(5):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    dst.copy_(src)
    end.record()
    end.synchronize()
    best = min(best or 1e30, start.elapsed_time(end))
print(best)
"""


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
def test_two_namespace_hosts_of_two_gpus(hosts, tmp_path):
    """launch/fakecluster.py --hosts 2 --ppn 2: NCCL sees two hosts (inter-host transport),
    check runs its per-host and pair rounds, run prints its per-host table. h2's ranks
    get GPUs 2 and 3."""
    if NP < 4:
        pytest.skip(f"needs 4 GPUs, torch sees {NP}")
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
            assert all(m["nwrong"] == 0 for m in measured(_doc(out)["results"]))
        if args[0] == "check":
            assert "# every host passed (2)" in done.stdout, show(done)
        if args[0] == "doctor":
            assert re.search(r"^#   h1 <-> h2: \S+", done.stdout, re.M), show(done)

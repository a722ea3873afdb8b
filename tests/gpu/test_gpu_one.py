"""The NCCL path on one CUDA GPU: NCCL at world size 1, one rank under a real mpirun.

What needs a GPU but no second one: device selection and eager init, the backend's
stream, -G capture and replay with its data check, -I 1's CUDA events, bf16/fp16 checks
on the device, the launch-cost and memory lines, info, doctor's probe, train and verify.
At world size 1 NCCL launches nothing for an in-place call (ncclLaunchOneRank copies only
when the output is another buffer), so what must move data here is out of place. Skipped,
with the reason, where torch sees no GPU or mpirun is missing; the test process itself
opens no CUDA context. Run on a GPU machine with `python -m pytest -q tests/gpu`;
tests/gpu/test_gpu_multi.py takes two GPUs and more.
"""
import glob
import re

import pytest

from conftest import PYTHON, check_usage_error, run, show
from gpu_helpers import COLLECTIVES, MODES, NEEDS_TWO, checked_run, doc, graph_args, gpus, measured, needs

pytestmark = [needs(1), pytest.mark.usefixtures("procs")]

SMALL = ["-b", "8", "-e", "4M", "-f", "4", "-n", "5", "-w", "2"]
ALONE = sorted(COLLECTIVES - NEEDS_TWO)      # what one rank can run


def one(args, env=None, timeout=600):
    return gpus(1, args, env=env, timeout=timeout)


# ---- devices ---------------------------------------------------------------------------
def test_device_is_chosen_and_the_communicator_made_at_init(tmp_path):
    """info runs no collective: NCCL's 'Init COMPLETE' in its log says the communicator was
    made by init_process_group (device_id), not by a first call; rank 0 is on cuda:0 with
    the bus id torch gives, and NCCL_TESTS_DEVICE=0 picks the same."""
    log = tmp_path / "nccl.%p.log"
    for extra in ({}, {"NCCL_TESTS_DEVICE": "0"}):
        done = one(["info", "--backend", "nccl"], env={"NCCL_DEBUG": "INFO",
                                                        "NCCL_DEBUG_SUBSYS": "INIT",
                                                        "NCCL_DEBUG_FILE": str(log), **extra},
                   timeout=300)
        assert done.returncode == 0, show(done)
        assert "cuda:0" in done.stdout, show(done)
    texts = [open(p).read() for p in glob.glob(str(tmp_path / "nccl.*.log"))]
    assert texts and all("Init COMPLETE" in t for t in texts), texts


def test_two_ranks_on_one_gpu_are_refused_naming_binding_per_task():
    """Both ranks see GPU 0 only (CUDA_VISIBLE_DEVICES=0): their UUIDs match, so the job
    is refused in one line, exit 2, before NCCL would hang or share the GPU."""
    done = gpus(2, ["run", "--backend", "nccl", "--collectives", "all_reduce", "-b", "1K",
                    "-e", "1K"], env={"CUDA_VISIBLE_DEVICES": "0"}, timeout=300)
    check_usage_error(done, "would share one GPU", 300)
    assert "--gpus-per-task=1" in done.stderr, show(done)


# One rank alone (no launcher): the NCCL backend as run makes it, its stream asked of the
# CUDA runtime itself.
STREAM = """
import ctypes, glob, os, sys
import torch
from mpibench.launch import bootstrap, launcher
from mpibench.measure.backends.torchdist import TorchBackend
session = bootstrap.start(launcher.detect(os.environ), backend="nccl", timeout=120, argv=[])
try:
    backend = TorchBackend(session)
    libs = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart*.so*"))
                  + glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "nvidia",
                                           "cuda_runtime", "lib", "libcudart.so*")))
    flags = ctypes.c_uint(99)
    rc = (ctypes.CDLL(libs[0]).cudaStreamGetFlags(ctypes.c_void_p(backend.stream.cuda_stream),
                                                  ctypes.byref(flags)) if libs else "none")
    print("STREAM", rc, flags.value, torch.cuda.current_stream() == backend.stream)
finally:
    session.close()
"""


def test_the_backend_stream_is_non_blocking_and_current():
    """The backend's own stream, current from its creation on, is cudaStreamNonBlocking (1),
    as nccl-tests' stream (torch's pool streams are made so)."""
    done = run([PYTHON, "-c", STREAM], timeout=300)
    assert done.returncode == 0, show(done)
    words = done.stdout.split("STREAM ", 1)[1].split()
    if words[0] == "none":
        pytest.skip("no libcudart next to torch to ask")
    assert words == ["0", "1", "True"], show(done)


# ---- run ----------------------------------------------------------------------------------
def test_every_collective_checks_clean_in_every_type(tmp_path):
    """float32, bfloat16 and float16 checked on the device; exactly the modes torch has."""
    rows = checked_run(1, ALONE, ["-d", "float32,bfloat16,float16"] + SMALL, tmp_path / "r.json")
    assert {r["dtype"] for r in rows} == {"float32", "bfloat16", "float16"}
    assert all(m["time_us"] > 0 for m in measured(rows))


@pytest.mark.parametrize("z", ["0", "1", "2", "3"])
def test_blocking_modes_on_the_stream(tmp_path, z):
    checked_run(1, ALONE, ["-z", z] + SMALL, tmp_path / "r.json")


@pytest.mark.parametrize("graphs", [1, 5])
@pytest.mark.parametrize("warmup", [0, 5])
def test_cuda_graphs_capture_replay_and_check_clean(tmp_path, graphs, warmup):
    checked_run(1, ALONE, graph_args(graphs, warmup), tmp_path / "g.json")


def test_the_graph_check_counts_what_a_replay_wrote(tmp_path):
    """The switch adds 1 to rank 0's first received element inside the check's graph only:
    with -G the check counts it (one wrong element per mode all_reduce has, exit 1);
    without -G there is no graph and nothing is wrong."""
    base = ["run", "--backend", "nccl", "--collectives", "all_reduce", "-b", "1M", "-e", "1M",
            "-n", "3", "-w", "1", "-c", "1", "--probe-iters", "0"]
    fault = {"MPIBENCH_FAULT": "graphcorrupt:0"}
    out = tmp_path / "g.json"
    done = one(base + ["-G", "2", "--json", str(out)], env=fault)
    assert done.returncode == 1, show(done)
    assert [m["nwrong"] for m in measured(doc(out)["results"])] == [1] * len(MODES["all_reduce"])
    done = one(base + ["--json", str(tmp_path / "e.json")], env=fault)
    assert done.returncode == 0, show(done)


def test_per_iteration_events_agree_with_the_row(tmp_path):
    """-I 1: CUDA events between the iterations, created before the loop; every iteration
    has a time, and at 64 MiB (-z 0) their mean is the row's host-clock time within 5%."""
    out = tmp_path / "r.json"
    done = one(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                "-b", "64M", "-e", "64M", "-n", "50", "-w", "5", "-c", "0", "-z", "0",
                "-I", "1", "--probe-iters", "0", "--json", str(out)])
    assert done.returncode == 0, show(done)
    assert "# per-iteration report: CUDA events" in done.stdout, show(done)
    m = doc(out)["results"][0]["out_of_place"]
    p = m["per_iter"]
    assert len(p["times_us"]) == 50 and all(t > 0 for t in p["times_us"])
    assert p["avg_us"] == pytest.approx(m["time_us"], rel=0.05), (p["avg_us"], m["time_us"])


def test_launch_cost_in_the_header_and_launch_bound_rows(tmp_path):
    """all_gather out of place, 16 B .. 256 MiB by 16: the small rows may be launch-bound,
    the 256 MiB row, a 256 MiB copy on the device, is not. (In place, or all_reduce, which
    torch has in place only, a lone rank launches no GPU work at all.)"""
    out = tmp_path / "r.json"
    done = one(["run", "--backend", "nccl", "--collectives", "all_gather", "--mode", "out",
                "-b", "16", "-e", "256M", "-f", "16", "--json", str(out)])
    assert done.returncode == 0, show(done)
    m = re.search(r"^# launch cost \(nccl\), us per call, .*: all_gather ([0-9.]+);", done.stdout,
                  re.M)
    assert m and float(m.group(1)) > 0, show(done)
    d = doc(out)
    cost = d["launch_cost_us"]["nccl"]["all_gather"]
    assert cost == pytest.approx(float(m.group(1)), abs=0.06)
    rows = d["results"]
    for x in measured(rows):
        assert x["launch_bound"] == (x["time_us"] <= 1.5 * cost), x
    if any(x["launch_bound"] for x in measured(rows)):
        assert "# Launch-bound rows" in done.stdout, show(done)
    assert rows[-1]["size"] == 256 << 20
    assert not any(x["launch_bound"] for x in measured(rows[-1:])), rows[-1]


def test_memory_line_reports_device_memory(tmp_path):
    out = tmp_path / "r.json"
    done = one(["run", "--backend", "nccl", "--collectives", "all_gather", "-b", "256M",
                "-e", "256M", "-n", "3", "-w", "1", "--json", str(out)])
    assert done.returncode == 0, show(done)
    assert "# peak device memory (torch.cuda.max_memory_allocated): " in done.stdout, show(done)
    for m in doc(out)["memory"]:
        assert m["device_peak_bytes"] >= m["buffer_bytes"] > 0, m


def test_blocking_wait_is_named_and_a_graph_of_it_checks_clean(tmp_path):
    """TORCH_NCCL_BLOCKING_WAIT=1: the header says so; with -G all_reduce and all_gather
    capture and check clean, as torch's synchronous collectives return no Work to wait for
    (sendrecv's Work, refused with -G, is in test_gpu_multi.py)."""
    out = tmp_path / "r.json"
    done = one(["run", "--backend", "nccl", "--collectives", "all_reduce,all_gather", "-z", "0",
                "-G", "2", "-c", "1", "--json", str(out)] + SMALL,
               env={"TORCH_NCCL_BLOCKING_WAIT": "1"})
    assert done.returncode == 0, show(done)
    assert "# TORCH_NCCL_BLOCKING_WAIT=1: point-to-point waits block the host" in done.stdout
    assert all(m["nwrong"] == 0 for m in measured(doc(out)["results"]))


# ---- the other commands ---------------------------------------------------------------------
def test_doctor_runs_its_nccl_probe():
    done = one(["doctor"], timeout=300)
    assert done.returncode == 0, show(done)
    section = done.stdout.split("# NCCL transports")[1].split("# findings")[0]
    assert "not checked" not in section and "FAILED TO RUN" not in section, show(done)
    assert "(one rank: NCCL connects nothing)" in section, show(done)


def test_train_tiny(tmp_path):
    out = tmp_path / "t.json"
    done = one(["train", "--backend", "nccl", "--preset", "tiny", "--steps", "2",
                "--warmup", "1", "--alone-iters", "2", "--json", str(out)])
    assert done.returncode == 0, show(done)
    t = doc(out)["train"]
    assert t["precision"] == "bf16 autocast"
    assert (t["replicas"] or {"agree": True})["agree"] is True, t["replicas"]


def test_verify_at_world_size_one(tmp_path):
    """One rank: both timers measure how fast calls launch, not a transfer; every
    correctness check still runs, eager and through a -G replay. The timer verdicts are
    printed for the record."""
    out = tmp_path / "v.json"
    done = one(["verify", "--backend", "nccl", "--sizes", "1M,64M", "--rounds", "3",
                "--json", str(out)], timeout=900)
    checks = {c["check"]: c for c in doc(out)["verify"]["checks"]}
    print({k: (c["verdict"], c.get("figure")) for k, c in checks.items()})
    assert done.returncode == 0, show(done)
    assert checks["correctness"]["verdict"] == "PASS"
    assert checks["correctness -G 1"]["verdict"] == "PASS"

"""`mpibench verify` on real CUDA GPUs; skipped, with the reason, where torch sees fewer
than two (the bare timer's own test: fewer than one) or mpirun is missing. Every GPU one
rank under mpirun, as tests/gpu/test_gpu_multi.py."""
import json

import pytest

from conftest import PYTHON, mpirun, run, show
from gpu_helpers import gpu_count, needs

pytestmark = pytest.mark.usefixtures("procs")

NP = gpu_count()
two_gpus = needs(2)

# The bare timer on one GPU, NCCL at world size 1; a stand-in for torch.distributed whose
# all_reduce also leaves a sleep on another stream (as a call a bug put on the wrong stream
# would): the device-wide synchronize must keep it inside the time.
BARE_ON_ANOTHER_STREAM = """
import sys, tempfile, torch, torch.distributed as dist
from mpibench.measure import baretimer
dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0,
                        world_size=1, device_id=torch.device("cuda:0"))
other = torch.cuda.Stream()
CYCLES = 200_000_000
class Shim:
    barrier = staticmethod(dist.barrier)
    @staticmethod
    def all_reduce(t):
        dist.all_reduce(t)
        with torch.cuda.stream(other):
            torch.cuda._sleep(CYCLES)
t = torch.ones(1 << 20, device="cuda")
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
with torch.cuda.stream(other):
    start.record(); torch.cuda._sleep(CYCLES); stop.record()
stop.synchronize()
print(start.elapsed_time(stop) * 1e-3, baretimer.torch_seconds(Shim, t, 5, Shim.barrier, torch.cuda.Stream()))
dist.destroy_process_group()
"""


@needs(1, launcher=False)
def test_bare_timer_waits_for_work_on_every_stream():
    done = run([PYTHON, "-c", BARE_ON_ANOTHER_STREAM], timeout=300)
    assert done.returncode == 0, show(done)
    sleep_s, bare_s = map(float, done.stdout.split()[-2:])
    assert bare_s >= 0.9 * sleep_s, (sleep_s, bare_s)


@two_gpus
def test_verify_on_gpus_timers_agree_and_every_check_runs(tmp_path):
    """The bare loop (host clock, device-wide synchronize) against mpibench's host timer
    within 2% from 64 MiB; the launch cost measured; correctness eager and through a -G
    replay."""
    out = tmp_path / "v.json"
    done = mpirun(NP, ["verify", "--backend", "nccl", "--sizes", "1M,64M,256M", "--rounds",
                       "12", "--json", str(out)], timeout=900)
    assert done.returncode == 0, show(done)
    checks = {c["check"]: c for c in json.loads(out.read_text())["verify"]["checks"]}
    for size in ("64 MiB", "256 MiB"):
        assert checks[f"timer {size}"]["verdict"] == "PASS", checks[f"timer {size}"]
    assert checks["timer 1 MiB"]["verdict"] == "INFO"          # below 64 MiB on GPUs
    assert checks["per-call cost"]["figure"].endswith(" us")
    assert "launch" in checks["per-call cost"]["reference"]
    assert checks["correctness"]["verdict"] == "PASS"
    assert checks["correctness -G 1"]["verdict"] == "PASS"
    assert checks["plausibility 256 MiB"]["verdict"] == "n/a"  # one host


@two_gpus
def test_verify_on_gpus_early_timer_fails_the_timer_check(tmp_path):
    out = tmp_path / "v.json"
    fault = ",".join(f"early:{r}:100" for r in range(NP))
    done = mpirun(NP, ["verify", "--backend", "nccl", "--sizes", "64M", "--rounds", "16",
                       "--json", str(out)], env={"MPIBENCH_FAULT": fault}, timeout=900)
    assert done.returncode == 1, show(done)
    check = {c["check"]: c for c in json.loads(out.read_text())["verify"]["checks"]}["timer 64 MiB"]
    assert check["verdict"] == "FAIL" and check["ratio"] < 0.05, check

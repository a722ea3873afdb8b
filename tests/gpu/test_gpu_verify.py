"""`mpibench verify` on real CUDA GPUs; skipped, with the reason, where torch sees fewer
than two. Every GPU one rank under mpirun, as tests/gpu/test_gpu.py."""
import json

import pytest

from conftest import mpirun, show

torch = pytest.importorskip("torch")
NP = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(
    NP < 2, reason=(f"needs 2 or more CUDA GPUs, torch sees {NP}" if torch.cuda.is_available()
                    else "no CUDA GPU visible to torch"))


def test_verify_on_gpus_timers_agree_and_every_check_runs(tmp_path):
    """CUDA events on the backend's stream against mpibench's host timer within 2% from
    64 MiB; the launch cost measured; correctness eager and through a -G replay."""
    out = tmp_path / "v.json"
    done = mpirun(NP, ["verify", "--backend", "nccl", "--sizes", "1M,64M,256M", "--rounds",
                       "5", "--json", str(out)], timeout=900)
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


def test_verify_on_gpus_early_timer_fails_the_timer_check(tmp_path):
    out = tmp_path / "v.json"
    fault = ",".join(f"early:{r}:100" for r in range(NP))
    done = mpirun(NP, ["verify", "--backend", "nccl", "--sizes", "64M", "--rounds", "3",
                       "--json", str(out)], env={"MPIBENCH_FAULT": fault}, timeout=900)
    assert done.returncode == 1, show(done)
    check = {c["check"]: c for c in json.loads(out.read_text())["verify"]["checks"]}["timer 64 MiB"]
    assert check["verdict"] == "FAIL" and check["ratio"] < 0.05, check

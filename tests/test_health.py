"""check --health as node-problem-detector runs a custom plugin: one line of at most 80
characters, exit 0 healthy, 1 a problem, anything else unknown. The NHC mode and its
scontrol drain run on the real SLURM cluster (test_slurm.py)."""
import json

import pytest

from conftest import check_usage_error, lone, mpirun, show
from mpibench.diagnose import health

pytestmark = pytest.mark.usefixtures("procs")


def test_npd_line_and_exit_code_of_a_host_with_a_slow_test(tmp_path):
    expect = tmp_path / "expect.json"
    expect.write_text('{"intra": {"min_busbw_GBps": 0.001}}')     # 64K here: 0.02-0.2 GB/s
    done = mpirun(2, ["check", "--health", "npd", "-b", "64K", "-n", "2", "-w", "1",
                      "--expect", str(expect), "--json", str(tmp_path / "h.json")],
                  env={"MPIBENCH_FAULT": "slowhost:0,slowhost:1", "MPIBENCH_TESTING": "1"})
    assert done.returncode == 1, show(done)
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= health.NPD_WIDTH, show(done)
    assert lines[0].startswith("mpibench: ") and " unhealthy: inside the host: busbw " in lines[0]
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["health"]["healthy"] is False and doc["health"]["drained"] is None   # npd: never
    assert doc["health"]["line"] == lines[0] and doc["exit"]["code"] == 1
    assert doc["check"]["hosts"][0]["verdict"] == "FAIL"


def test_health_lines_and_options():
    assert health.line("nhc", "n1", None) == "n1 | Healthy"
    assert health.line("nhc", "n1", "doctor: x") == "n1 | ERROR: mpibench: doctor: x"
    assert health.line("npd", "n1", None) == "mpibench: n1 healthy"
    long = health.line("npd", "n1", "x" * 200)
    assert len(long) == health.NPD_WIDTH and long.endswith("...")
    check_usage_error(lone(["check", "--report-only"]), "--report-only goes with --health", 30)

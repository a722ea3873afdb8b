"""Every script in bench/ runs in its --quick mode (seconds) and prints its table, so that
none of them rots unseen; the full runs stay manual. Scripts on namespace hosts need root."""
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import MPIRUN, PYTHON, run, show
from test_verify import peers  # noqa: F401  (the fixture that installs iperf3 and NetPIPE)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "launch"))

ROOTFLAGS = ["--allow-run-as-root"] if os.geteuid() == 0 else []
UNDER_MPIRUN = [MPIRUN, *ROOTFLAGS, "--oversubscribe", "-np", "2", PYTHON]

# script -> (how it is started, a line of its table)
SCRIPTS = {
    "overhead.py": (UNDER_MPIRUN, r"^collective\s+size\s+iters\s+bare us/call\s+mpibench us/call"),
    "train_overhead.py": (UNDER_MPIRUN, r"^# median ratio over 2 rounds: \d+\.\d{3}"),
    "osu_compare.py": ([PYTHON], r"^\s+1024\s+n/a\s+\d+\.\d\d\s"),
    "predict_scaling.py": ([PYTHON], r"^#\s+256 KiB\s+[\d.]+\s+[\d.]+\s+[\d.]+\s"),
    "predict_real.py": ([PYTHON],
                        r"^\| alcf_polaris/\S+_env5 \| all_reduce \| 2,8 -> 540 \| \d+ \| \d+% \| \d+% \|"),
    "predict_calibrate.py": ([PYTHON],
                             r"^# bands.py's constants \(.*\): \d+% inside or not predicted, \d+% predicted"),
    "train_hosts.py": ([PYTHON], r"^\| 2 hosts x 1 rank \| 1gbit \| \d+ \|"),
    "fabric_plan.py": ([PYTHON], r"^\s+512\s+8\s+\d+\s+\d+\.\d{3}\s+\d+\.\d\d$"),
    "verify_hosts.py": ([PYTHON], r"^# 2 rounds, 3 iterations after 1 warm-up$"),
    "results_io.py": ([PYTHON], r"^\s+100\s+2\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s"),
    "verify_alarms.py": ([PYTHON], r"^# correct harness: exit 1 in 0 of 1 runs"),
    "verdicts.py": ([PYTHON], r"^\| host \| 1 \| \d+ \| \d \| \d \| \d+ \| \d+ \| [\d.]+, [\d.]+ \|$"),
    "path_facts.py": ([PYTHON], r"^fabricated 8 x H100, 4 NICs\s+[\d.]+\s+[\d.]+$"),
}
ON_HOSTS = {"predict_scaling.py", "train_hosts.py", "verify_hosts.py", "verdicts.py"}
NEEDS_PEERS = {"verify_hosts.py"}      # iperf3 and NetPIPE, installed as tests/test_verify.py does
sys.path.insert(0, str(ROOT / "bench"))
import predict_real  # noqa: E402
needs_data = pytest.mark.skipif(predict_real.data_dir() is None, reason="shared/realworld/scaling "
                                "(published runs) is absent beside the repository")
NEEDS_DATA = {"predict_real.py", "predict_calibrate.py"}


def test_every_bench_script_is_covered():
    assert sorted(p.name for p in (ROOT / "bench").glob("*.py")) == sorted(SCRIPTS)


@pytest.mark.parametrize("script", [pytest.param(s, marks=needs_data) if s in NEEDS_DATA else s
                                    for s in SCRIPTS if s not in ON_HOSTS])
def test_bench_script_quick_mode_prints_its_table(script, procs):
    quick(script)


@pytest.mark.parametrize("script", sorted(ON_HOSTS))
def test_bench_script_on_hosts_quick_mode_prints_its_table(script, hosts, request):
    if script in NEEDS_PEERS:
        request.getfixturevalue("peers")
    quick(script)


def quick(script):
    start, table = SCRIPTS[script]
    done = run([*start, str(ROOT / "bench" / script), "--quick"],
               env={"PYTHONPATH": str(ROOT)}, timeout=240)
    assert done.returncode == 0, show(done)
    assert re.search(table, done.stdout, re.M), show(done)
    assert "Traceback" not in done.stderr, show(done)
    print(f"{script} --quick: {done.elapsed:.1f} s")

"""The per-call launch cost (measure/launchcost.py): a real gloo group under mpirun, and the
row marking as pure logic (its header line: tests/test_nccl_path_cpu.py)."""
import os
import socket

import pytest

from conftest import MPIRUN, PYTHON, ROOT, run, show
from mpibench.measure import launchcost
from mpibench.measure.collectives import NAMES


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.usefixtures("procs")
def test_launch_cost_of_real_gloo_calls():
    """Two gloo ranks: the cost is positive and finite, every call issued is completed by
    finish, and a call that spends 2 ms on the host costs at least that (the timer sees
    the host's work, and only the launches); every collective's own cost is measured
    through the backend's calls (root: the last rank)."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done = run([MPIRUN] + root + ["--oversubscribe", "-np", "2", "-x", "PYTHONPATH",
                                  PYTHON, os.path.join(ROOT, "tests/scripts/launchcost_gloo.py")],
               env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
                    "PYTHONPATH": ROOT}, timeout=120)
    assert done.returncode == 0, show(done)
    lines = [dict(f.split("=") for f in line.split()) for line in done.stdout.splitlines()
             if line.startswith("rank=")]
    assert len(lines) == 2, show(done)
    for f in lines:
        fast, slow = float(f["fast"]), float(f["slow"])
        assert 0 < fast < 0.5, show(done)
        assert slow >= 0.002, show(done)
        assert f["completed"] == "True", show(done)
        assert float(f["value"]) == 2.0, show(done)
        assert 0 < float(f["backend"]) < 0.5, show(done)
        for name in NAMES:
            assert 0 < float(f[name]) < 0.5, (name, show(done))


def test_finish_runs_after_the_clock_and_gets_every_result():
    seen = []
    count = iter(range(10))
    per = launchcost.per_call_seconds(lambda: next(count), 10, seen.extend)
    assert seen == list(range(10))
    assert per >= 0
    with pytest.raises(ValueError):
        launchcost.per_call_seconds(lambda: None, 0)


def test_rows_within_one_and_a_half_launches_are_marked():
    rows = [{"out_of_place": {"time_us": 14.9}, "in_place": {"time_us": 15.1}},
            {"out_of_place": {"time_us": 400.0}, "in_place": None}]
    assert launchcost.mark_rows(rows, 10e-6) == 1
    assert rows[0]["out_of_place"]["launch_bound"] is True
    assert rows[0]["in_place"]["launch_bound"] is False
    assert rows[1]["out_of_place"]["launch_bound"] is False
    assert launchcost.mark_rows(rows, None) == 0
    assert not launchcost.launch_bound(1e-6, None)
    assert not launchcost.launch_bound(1e-6, 0.0)


def test_each_collective_is_marked_against_its_own_cost_and_none_with_graphs():
    """A 30 us sendrecv row is launch-bound against sendrecv's 25 us, not against
    all_reduce's 10 us; with -G no row is marked; an unmeasured collective is not marked."""
    costs = {"all_reduce": 10e-6, "sendrecv": 25e-6}
    rows = {name: {"out_of_place": {"time_us": 30.0}, "in_place": None}
            for name in ("all_reduce", "sendrecv", "gather")}
    for name, row in rows.items():
        launchcost.mark_rows([row], launchcost.row_cost(costs, name, 0))
    assert rows["sendrecv"]["out_of_place"]["launch_bound"] is True
    assert rows["all_reduce"]["out_of_place"]["launch_bound"] is False
    assert "launch_bound" not in rows["gather"]["out_of_place"]
    assert launchcost.row_cost(costs, "sendrecv", 5) is None
    assert launchcost.row_cost(None, "sendrecv", 0) is None
    graphed = {"out_of_place": {"time_us": 1.0}, "in_place": None}
    assert launchcost.mark_rows([graphed], launchcost.row_cost(costs, "all_reduce", 1)) == 0
    assert "launch_bound" not in graphed["out_of_place"]


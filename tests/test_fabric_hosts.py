"""check below the host on namespace hosts, real mpirun, gloo: two rails (eth0 and eth1
on their own bridges) with one rail of one host slowed; leaves joined through a spine
with one uplink or one host link slowed; bad topology and rail input."""
import json
import re

import pytest

from conftest import mpibench_lines
from launch_helpers import QUARTER, RATE, check_on_hosts
from fakecluster import FakeCluster, split_leaves  # noqa: E402

needs_hosts = pytest.mark.usefixtures("hosts")
pytestmark = needs_hosts
# Small enough for a few seconds a round, large enough that a quarter-rate link stands
# out: 2 MiB both ways at once takes ~45 ms at 400 Mbit/s and ~180 ms at 100 Mbit/s.
SMALL = ["-b", "2M", "-n", "3", "-w", "1"]


def _check(cluster, args, tmp_path, ppn=1, topology=None, extra_env=None):
    """check on the cluster's hosts; the topology text is written to a file first."""
    # Intra-host figures on this two-core machine are noise: a low floor, as test_check does
    expect = tmp_path / "expect.json"
    expect.write_text('{"intra": {"min_busbw_GBps": 0.001}}')
    args = ["--expect", expect, *args]
    if topology is not None:
        path = tmp_path / "topology.conf"
        path.write_text(topology)
        args = ["--topology", path, *args]
    spec = ",".join(f"{h}:{ppn}" for h in cluster.hosts)
    return check_on_hosts(cluster, spec, [*SMALL, *args], extra_env)


def _verdicts(stdout):
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^#  (h\d+)\s+\d+\s.*?\s(PASS|FAIL|RAIL)\s", stdout, re.M)}


def _figures(doc):
    """{(host, partner, rail): busbw} of every pair figure."""
    return {(h["host"], p["partner"], p["rail"]): p["busbw_GBps"]
            for h in doc["hosts"] for p in h["pairs"]}


def _line(stdout, start):
    return next((x for x in stdout.splitlines() if x.startswith(start)), None)


def test_two_rails_name_the_slow_rail_of_one_host_alone(tmp_path):
    out = tmp_path / "c.json"
    with FakeCluster(hosts=4, rails=2, rates={"*": RATE, "h3:eth1": QUARTER}) as c:
        r = _check(c, ["--rails", "eth0,eth1", "--json", out], tmp_path, ppn=2)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(out.read_text())["check"]
    figs = _figures(doc)
    slow = [v for (h, p, rail), v in figs.items() if rail == 1 and "h3" in (h, p)]
    fast = [v for (h, p, rail), v in figs.items() if not (rail == 1 and "h3" in (h, p))]
    print(f"rail pairs GB/s: h3's rail 1 {sorted(slow)}; every other {sorted(fast)}; "
          f"round seconds {doc['round_seconds']}")
    assert _verdicts(r.stdout) == {"h1": "PASS", "h2": "PASS", "h3": "RAIL", "h4": "PASS"}, r.stdout
    assert doc["suspects"] == ["h3 rail 1 (eth1)"], doc["suspects"]
    assert doc["failing_hosts"] == [] and "scontrol" not in r.stdout
    assert doc["fabric"]["nics"] == {f"h{i}:{k}": f"eth{k}" for i in range(1, 5) for k in (0, 1)}
    assert "# SUSPECT LINKS AND SWITCHES (1, for the fabric team): h3 rail 1 (eth1)" in r.stdout
    assert re.search(r"rail 1 \(eth1\): below min_busbw_GBps [0-9.]+ \(0.8 x the median rail of "
                     r"a pair\) with h\d \([0-9.]+ GB/s, spread \+-\d+%\), h\d \([0-9.]+ GB/s, "
                     r"spread \+-\d+%\); its other rails passed", r.stdout), r.stdout
    assert mpibench_lines(r.stderr) == [
        "mpibench: check FAILED: 1 suspect link or switch: h3 rail 1 (eth1)"]
    assert max(slow) < 0.5 * min(fast)


def test_two_rails_all_equal_pass(tmp_path):
    out = tmp_path / "c.json"
    with FakeCluster(hosts=4, rails=2, rates=RATE) as c:
        r = _check(c, ["--json", out], tmp_path, ppn=2, extra_env={"MPIBENCH_RAILS": "eth0,eth1"})
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())["check"]
    print(f"rail pairs GB/s: {sorted(_figures(doc).values())}; round seconds {doc['round_seconds']}")
    assert set(_verdicts(r.stdout).values()) == {"PASS"} and "# every host passed (4)" in r.stdout
    assert not doc["suspects"] and doc["pair_rounds"] == len(doc["rounds"])
    # Two rounds, or more that test again a path a passing disturbance failed once (it
    # happens on this loaded machine): each named as transient with both figures, no more.
    retested = {f"path {a}-{b}" for r in doc["rounds"][2:] for a, b in r}
    assert {t["what"].rsplit(" rail", 1)[0] for t in doc["transient"]} <= retested, doc["transient"]
    assert bool(doc["transient"]) == (len(doc["rounds"]) > 2)
    for t in doc["transient"]:
        assert re.search(rf"^# TRANSIENT {t['what']}: at first round \d: busbw .*; then round \d: "
                         rf"busbw [0-9.]+ GB/s, passed; nobody drained for it$", r.stdout, re.M)


def test_a_rail_slow_on_every_host_is_its_switch(tmp_path):
    out = tmp_path / "c.json"
    slow = {f"h{i}:eth1": QUARTER for i in range(1, 5)}
    with FakeCluster(hosts=4, rails=2, rates={"*": RATE, **slow}) as c:
        r = _check(c, ["--rails", "eth0,eth1", "--json", out], tmp_path, ppn=2)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(out.read_text())["check"]
    print(f"rail pairs GB/s: {sorted(_figures(doc).items())}; round seconds {doc['round_seconds']}")
    assert doc["suspects"] == ["rail 1 switch (slow on every host's rail 1)"], doc["suspects"]
    assert doc["failing_hosts"] == [] and "scontrol" not in r.stdout
    assert set(_verdicts(r.stdout).values()) == {"PASS"}, r.stdout


LEAVES = {"leaf1": ["h1", "h2", "h3", "h4"], "leaf2": ["h5", "h6", "h7", "h8"]}


def test_a_slow_uplink_drains_no_host(tmp_path):
    out = tmp_path / "c.json"
    with FakeCluster(hosts=8, rates=RATE, leaves=LEAVES, uplink_rates={"leaf2": QUARTER}) as c:
        r = _check(c, ["--json", out], tmp_path, topology=c.topology_conf())
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(out.read_text())["check"]
    figs = _figures(doc)
    across = [v for (h, p, _), v in figs.items() if (h in LEAVES["leaf1"]) != (p in LEAVES["leaf1"])]
    inside = [v for (h, p, _), v in figs.items() if (h in LEAVES["leaf1"]) == (p in LEAVES["leaf1"])]
    print(f"pairs GB/s inside leaves {sorted(inside)}; across {sorted(across)}; "
          f"round seconds {doc['round_seconds']}")
    assert doc["rounds"][0] == [["h1", "h2"], ["h3", "h4"], ["h5", "h6"], ["h7", "h8"]]
    assert doc["rounds"][1] == [["h1", "h5"], ["h2", "h6"], ["h3", "h7"], ["h4", "h8"]]
    assert doc["failing_hosts"] == [] and "scontrol" not in r.stdout
    assert set(_verdicts(r.stdout).values()) == {"PASS"}, r.stdout
    # with two leaves every path across crosses both uplinks: said as a tie, never a host
    assert doc["suspects"] == ["uplink leaf1-spine1 or uplink leaf2-spine1 (a tie: every tested "
                               "path crosses both, no pair of hosts can tell them apart)"]
    assert max(across) < 0.5 * min(inside)


def test_three_leaves_name_the_slow_uplink_alone(tmp_path):
    # with a third leaf, paths from leaf2 to leaf1 and leaf3 fail while leaf1-leaf3 pass
    leaves = split_leaves([f"h{i}" for i in range(1, 9)], 3)
    with FakeCluster(hosts=8, rates=RATE, leaves=leaves, uplink_rates={"leaf2": QUARTER}) as c:
        r = _check(c, [], tmp_path, topology=c.topology_conf())
    assert r.returncode == 1, r.stdout + r.stderr
    assert set(_verdicts(r.stdout).values()) == {"PASS"} and "scontrol" not in r.stdout, r.stdout
    assert ("# SUSPECT LINKS AND SWITCHES (1, for the fabric team): uplink leaf2-spine1"
            in r.stdout.splitlines()), r.stdout


def test_one_slow_host_link_under_leaves_names_that_host_alone(tmp_path):
    # and counters: the test-only switch makes an error counter move on h6 and on h2
    with FakeCluster(hosts=8, rates={"*": RATE, "h6": QUARTER}, leaves=LEAVES) as c:
        r = _check(c, [], tmp_path, topology=c.topology_conf(),
                   extra_env={"MPIBENCH_FAULT": "counter:5,counter:1:rx_crc_errors"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert _verdicts(r.stdout) == {f"h{i}": "FAIL" if i == 6 else "PASS" for i in range(1, 9)}
    assert "# FAILING HOSTS (1 of 8): h6" in r.stdout and "SUSPECT" not in r.stdout
    assert mpibench_lines(r.stderr) == ["mpibench: check FAILED: 1 host failed: h6"]
    rounds = len(re.findall(r"^# 2\. between hosts, round", r.stdout, re.M))
    h6 = _line(r.stdout, "#  h6 ")
    assert h6.rstrip().endswith(f"; counters moved: eth0 symbol_error +{rounds}"), h6
    assert re.search(rf"^# WARNING h2 passed, but its counters moved: (.*, )?eth0 rx_crc_errors "
                     rf"\+{rounds}$", r.stdout, re.M), r.stdout


@pytest.mark.parametrize("topology, words", [
    ("SwitchName=leaf1 Nodes=h[1-3]\n", "names host not in this job: h3"),
    ("SwitchName=a Switches=b Nodes=h[1-2]\nSwitchName=b Switches=a\n", "a loop in the switches"),
    ("SwitchName=l1 Nodes=h[1-2]\nSwitchName=l2 Nodes=h2\n", "host h2 is under two switches"),
])
def test_bad_topology_is_one_line_and_exit_2(tmp_path, topology, words):
    with FakeCluster(hosts=2) as c:
        r = _check(c, [], tmp_path, topology=topology)
    lines = mpibench_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_more_rails_than_interfaces_is_one_line_and_exit_2(tmp_path):
    with FakeCluster(hosts=2, rails=2) as c:
        r = _check(c, ["--rails", "eth0,eth1,eth2"], tmp_path, ppn=3)
    lines = mpibench_lines(r.stderr)
    assert r.returncode == 2 and len(lines) == 1, r.stdout + r.stderr
    assert "rail 2 is eth2, which host h" in lines[0] and "more rails than interfaces" in lines[0]
    assert "Traceback" not in r.stdout + r.stderr

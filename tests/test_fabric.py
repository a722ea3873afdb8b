"""check below the host, as pure logic: topology.conf read and refused, the pairing
rounds over leaves and rails, tomography naming (host, rail), uplinks and rail switches,
and port counters read from a fabricated sysfs tree."""
import random
import time

import pytest

from mpibench.diagnose import fabricplan, hostfacts, tomography, topology
from mpibench.errors import UsageError
from mpibench.launch.slurm import expand_nodelist


# ---- topology.conf ----
def _topo(text, hosts, strict=True):
    return topology.build(topology.parse(text, "topo.conf"), hosts, "topo.conf", strict)


def test_topology_reads_leaves_and_spines_with_hostlists():
    text = ("# two leaves\nSwitchName=leaf1 Nodes=n[01-02]\n"
            "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[03-04]\n"
            "SwitchName=spine1 Switches=leaf[1-2]\n")
    t = _topo(text, ["n01", "n02", "n03", "n04"])
    assert t.leaf == {"n01": "leaf1", "n02": "leaf1", "n03": "leaf2", "n04": "leaf2"}
    assert t.uplinks_between("leaf1", "leaf2") == [("leaf1", "spine1"), ("leaf2", "spine1")]
    assert t.uplinks_between("leaf1", "leaf1") == []


def test_topology_three_levels_cross_only_up_to_the_common_switch():
    text = ("SwitchName=l1 Nodes=a\nSwitchName=l2 Nodes=b\nSwitchName=l3 Nodes=c\n"
            "SwitchName=s1 Switches=l[1-2]\nSwitchName=s2 Switches=l3\nSwitchName=core Switches=s[1-2]\n")
    t = _topo(text, ["a", "b", "c"])
    assert t.uplinks_between("l1", "l2") == [("l1", "s1"), ("l2", "s1")]
    assert t.uplinks_between("l1", "l3") == [("l1", "s1"), ("s1", "core"), ("l3", "s2"),
                                             ("s2", "core")]


@pytest.mark.parametrize("text, hosts, words", [
    ("SwitchName=leaf1 Nodes=n[1-3]\n", ["n1", "n2"], "names host not in this job: n3"),
    ("SwitchName=leaf1 Nodes=n1\n", ["n1", "n2"], "leaves out host of this job: n2"),
    ("SwitchName=a Switches=b Nodes=n1\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n",
     ["n1"], "a loop in the switches: "),
    ("SwitchName=l1 Nodes=n[1-2]\nSwitchName=l2 Nodes=n2\n", ["n1", "n2"],
     "host n2 is under two switches, l1 and l2"),
    ("SwitchName=l1 Nodes=n1\nSwitchName=s Switches=l1,l9\n", ["n1"], "lists l9, which has no"),
    ("SwitchName=l1 Nodes=n1\nSwitchName=l1 Nodes=n2\n", ["n1", "n2"], "described twice"),
    ("Nodes=n1\n", ["n1"], "expected SwitchName=NAME"),
    ("# nothing\n", ["n1"], "no SwitchName= line"),
])
def test_topology_refuses_bad_input_in_one_line(text, hosts, words):
    with pytest.raises(UsageError) as e:
        _topo(text, hosts)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_topology_from_slurm_drops_hosts_outside_the_job():
    t = _topo("SwitchName=l1 Nodes=n[1-4]\n", ["n2", "n3"], strict=False)
    assert t.leaf == {"n2": "l1", "n3": "l1"}


# ---- the rounds ----
def _fat_tree(hosts, per_leaf=32):
    names = [f"n{i:04d}" for i in range(hosts)]
    leaves = hosts // per_leaf
    text = "".join(f"SwitchName=leaf{k + 1} Nodes=n[{k * per_leaf:04d}-{(k + 1) * per_leaf - 1:04d}]\n"
                   for k in range(leaves))
    text += f"SwitchName=spine1 Switches=leaf[1-{leaves}]\n"
    return names, _topo(text, names)


def _coverage(rounds):
    partners = {}
    for pairs in rounds:
        for a, b in pairs:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
    return partners


@pytest.mark.parametrize("hosts, per_leaf", [(64, 32), (96, 32), (70, 7), (9, 9), (10, 10), (2, 2)])
def test_first_rounds_put_every_host_on_two_paths_with_different_partners(hosts, per_leaf):
    names = [f"h{i}" for i in range(hosts)]
    text = "".join(f"SwitchName=l{k} Nodes={','.join(names[k * per_leaf:(k + 1) * per_leaf])}\n"
                   for k in range(hosts // per_leaf))
    text += f"SwitchName=s Switches={','.join(f'l{k}' for k in range(hosts // per_leaf))}\n"
    fabric = tomography.Fabric(names, 2, _topo(text, names))
    rounds = fabricplan.first_rounds(fabric)
    for pairs in rounds:
        flat = [h for p in pairs for h in p]
        assert len(flat) == len(set(flat)), "a host in two pairs of one round"
    partners = _coverage(rounds)
    few = [h for h in range(hosts) if len(partners.get(h, ())) < 2]
    # an odd count in one leaf leaves its two end hosts on one path; two hosts, one partner
    assert len(few) <= (2 if hosts == 2 or hosts % 2 else 0), (few, rounds)
    if hosts // per_leaf > 1:
        across = {(fabric.leaf[a], fabric.leaf[b]) for a, b in rounds[-1]}
        assert all(a != b for a, b in across)


def _plant(names, topo, rails, rng):
    n = len(names)
    bad_hosts = rng.sample(range(n), 5)
    bad_switch = rng.randrange(rails)
    others = [h for h in range(n) if h not in bad_hosts]
    # a bad rail on the bad rail switch's rail could not be told from it: none planted there
    bad_rails = set()
    while len(bad_rails) < 5:
        bad_rails.add((rng.choice(others), rng.choice([r for r in range(rails) if r != bad_switch])))
    leaves = sorted(set(topo.leaf.values()))
    bad_ups = [tomography.uplink(lf, "spine1") for lf in rng.sample(leaves, 2)]
    bad = {tomography.nic(h, r) for h in bad_hosts for r in range(rails)}
    bad |= {tomography.nic(h, r) for h, r in bad_rails}
    bad |= set(bad_ups) | {tomography.rail_switch(bad_switch)}
    return bad_hosts, bad_rails, bad_ups, bad_switch, bad


@pytest.mark.parametrize("hosts", [1024, 4096])
def test_scale_names_exactly_the_planted_faults_in_at_most_4_rounds(hosts):
    rails = 8
    names, topo = _fat_tree(hosts)
    total, rounds_seen = 0.0, []
    for seed in range(10):
        rng = random.Random(seed)
        fabric = tomography.Fabric(names, rails, topo)
        bad_hosts, bad_rails, bad_ups, bad_switch, bad = _plant(names, topo, rails, rng)

        def judge(pairs, fabric=fabric, bad=bad):
            return {(a, b): [not (set(fabric.path(a, b, r)) & bad) for r in range(rails)]
                    for a, b in pairs}
        t0 = time.perf_counter()
        v = fabricplan.run(fabric, judge)
        total += time.perf_counter() - t0
        rounds_seen.append(v["rounds"])
        assert v["rounds"] <= 4
        assert not v["ties"] and not v["unexplained"], (seed, v["ties"], v["unexplained"])
        assert sorted(v["failed_hosts"]) == sorted(bad_hosts), seed
        named = set(v["named"])
        rails_named = {(x[1], x[2]) for x in named if x[0] == "nic" and x[1] not in bad_hosts}
        assert rails_named == bad_rails, seed
        assert {x for x in named if x[0] == "up"} == set(bad_ups), seed
        assert {x for x in named if x[0] == "rail"} == {tomography.rail_switch(bad_switch)}, seed
        # the bad rail switch hides its own rail of the bad hosts: not named, not needed
        assert named == {x for x in bad if not (x[0] == "nic" and x[2] == bad_switch)}, seed
    print(f"{hosts} hosts x {rails} rails, 10 seeds: rounds {rounds_seen}, "
          f"planning and localisation {total / 10:.3f} s per check")


def test_two_leaves_a_slow_uplink_is_a_tie_no_pair_can_decide():
    names = [f"h{i}" for i in range(1, 9)]
    topo = _topo("SwitchName=leaf1 Nodes=h[1-4]\nSwitchName=leaf2 Nodes=h[5-8]\n"
                 "SwitchName=spine1 Switches=leaf[1-2]\n", names)
    fabric = tomography.Fabric(names, 1, topo)
    bad = {tomography.uplink("leaf2", "spine1")}
    v = fabricplan.run(fabric, lambda pairs: {(a, b): [not (set(fabric.path(a, b, 0)) & bad)]
                                              for a, b in pairs})
    assert v["named"] == [] and v["failed_hosts"] == []
    assert [sorted(t) for t in v["ties"]] == [sorted([("up", "leaf1", "spine1"),
                                                      ("up", "leaf2", "spine1")])]
    assert v["deciders"] == {("up", "leaf1", "spine1"): None, ("up", "leaf2", "spine1"): None}


def test_a_tie_is_decided_by_the_pair_tested_in_the_next_round():
    # h1 and h2 (paired in round 1) both bad on rail 0, and h2's round-2 partner h3 too:
    # round 2 leaves h1's second path failing with h4 ... decided by a partner proven good
    names = [f"h{i}" for i in range(1, 9)]
    fabric = tomography.Fabric(names, 2, topology.single(names))
    bad = {tomography.nic(0, 0), tomography.nic(1, 0), tomography.nic(2, 0)}
    v = fabricplan.run(fabric, lambda pairs: {(a, b): [not (set(fabric.path(a, b, r)) & bad)
                                                       for r in range(2)] for a, b in pairs})
    assert set(v["named"]) == bad and not v["ties"] and v["rounds"] >= 3, v


def test_with_nothing_passed_every_host_fails():
    names = [f"h{i}" for i in range(1, 7)]
    fabric = tomography.Fabric(names, 1, topology.single(names))
    v = fabricplan.run(fabric, lambda pairs: {p: [False] for p in pairs})
    assert v["failed_hosts"] == list(range(6)) and not v["ties"]


def test_names_say_host_rail_nic_and_leaf():
    names = ["h1", "h2"]
    topo = _topo("SwitchName=leaf1 Nodes=h[1-2]\n", names)
    fabric = tomography.Fabric(names, 2, topo, nics={(0, 1): "eth1"})
    assert fabric.name(tomography.nic(0, 1)) == "h1 rail 1 (eth1, its link to leaf1)"
    assert fabric.name(tomography.uplink("leaf2", "spine1")) == "uplink leaf2-spine1"
    assert fabric.name(tomography.rail_switch(3)).startswith("rail 3 switch")
    assert expand_nodelist("h[1-2]") == names


# ---- port counters, on a fabricated sysfs tree ----
def _write(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")


IB = "sys/class/infiniband/mlx5_1/ports/1/"
NET = "sys/class/net/eth1/"


def test_counters_that_moved_and_links_that_changed(tmp_path):
    _write(tmp_path, {IB + "counters/symbol_error": "0", IB + "counters/link_downed": "1",
                      IB + "counters/port_rcv_data": "1000", IB + "state": "4: ACTIVE",
                      IB + "rate": "400 Gb/sec (4X NDR)",
                      NET + "statistics/rx_crc_errors": "5", NET + "statistics/rx_bytes": "9",
                      NET + "operstate": "up", NET + "speed": "100000",
                      "sys/class/net/lo/statistics/rx_errors": "0"})
    before = hostfacts.snapshot(str(tmp_path))
    assert set(before) == {"mlx5_1/1", "eth1"}
    assert before["mlx5_1/1"]["counters"] == {"symbol_error": 0, "link_downed": 1}
    assert before["eth1"] == {"state": "up", "speed": "100000", "counters": {"rx_crc_errors": 5}}
    assert hostfacts.delta(before, hostfacts.snapshot(str(tmp_path))) == []
    _write(tmp_path, {IB + "counters/symbol_error": "7", IB + "counters/port_rcv_data": "99999",
                      NET + "statistics/rx_bytes": "12345", NET + "operstate": "down",
                      NET + "statistics/rx_crc_errors": "4"})
    changes = hostfacts.delta(before, hostfacts.snapshot(str(tmp_path)))
    assert changes == [{"port": "eth1", "what": "state", "from": "up", "to": "down"},
                       {"port": "mlx5_1/1", "what": "symbol_error", "moved": 7}]
    assert hostfacts.describe_changes(changes) == "eth1 state up -> down, mlx5_1/1 symbol_error +7"
    assert hostfacts.on_ports(changes, {"mlx5_1"}) == changes[1:]
    assert hostfacts.snapshot(str(tmp_path / "none")) == {}


@pytest.mark.usefixtures("procs")
def test_topology_from_scontrol_under_slurm(tmp_path, monkeypatch):
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\n[ \"$*\" = 'show topology' ] || exit 1\n"
                    "echo 'SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[1-4]'\n"
                    "echo 'SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[5-8]'\n"
                    "echo 'SwitchName=spine1 Level=1 LinkSpeed=1 Switches=leaf[1-2]'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    text = topology.from_slurm()
    t = topology.build(topology.parse(text, "scontrol show topology"), ["n2", "n7"],
                       "scontrol show topology", strict=False)
    assert t.leaf == {"n2": "leaf1", "n7": "leaf2"}
    fake.write_text("#!/bin/sh\necho 'No topology information available'\n")
    assert topology.from_slurm() is None
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert topology.from_slurm() is None


# ---- rails ----
def test_rails_parse_and_bind(monkeypatch):
    from mpibench.launch import netaddr, rails
    assert rails.parse(None) is None and rails.parse(" ") is None
    assert rails.parse("eth0, eth1") == ["eth0", "eth1"]
    for bad, words in (("eth0,,eth1", "an empty interface name"), ("eth0,eth0", "eth0 named twice")):
        with pytest.raises(ValueError, match=words):
            rails.parse(bad)
    # bind() sets GLOO_SOCKET_IFNAME in this process: setenv first, so that the test's end
    # restores it (a delenv of an unset variable records nothing to restore)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "unset")
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    assert rails.bind(0, 2, {}, "h1") == (None, None)
    _, error = rails.bind(0, 3, {"MPIBENCH_RAILS": "a,b"}, "h1")
    assert error == ("MPIBENCH_RAILS names 2 rails (a,b) for 3 ranks on host h1: give one "
                     "interface per local rank")
    _, error = rails.bind(1, 2, {"MPIBENCH_RAILS": "lo,nosuch9"}, "h1")
    assert "rail 1 is nosuch9, which host h1 does not have" in error
    have = next(iter(netaddr.interface_addresses()))
    env = {"MPIBENCH_RAILS": f"nosuch9,{have}"}
    assert rails.bind(1, 2, env, "h1") == ((1, have), None)
    assert env["GLOO_SOCKET_IFNAME"] == have == __import__("os").environ["GLOO_SOCKET_IFNAME"]


def test_a_path_that_fails_once_is_tested_again_and_then_transient():
    names = [f"h{i}" for i in range(1, 7)]
    fabric = tomography.Fabric(names, 1, topology.single(names))
    seen = []

    def judge(pairs):            # h3-h4 fails in round 1 only
        seen.append(pairs)
        return {p: [not (p == (2, 3) and len(seen) == 1)] for p in pairs}
    v = fabricplan.run(fabric, judge)
    assert seen[2] == [(2, 3)] and v["rounds"] == 3
    assert v["transient"] == [(2, 3, 0)] and not v["unexplained"] and not v["named"]

    def lasting(pairs):          # h3-h4 fails every time: a fault between the two
        return {p: [p != (2, 3)] for p in pairs}
    v = fabricplan.run(fabric, lasting)
    assert v["unexplained"] == [(2, 3, 0)] and not v["transient"] and v["rounds"] == 3

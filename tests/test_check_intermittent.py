"""check names faults that come and go INTERMITTENT (failed k of m calls), drains nobody for
them and still condemns a lasting fault: the judge without processes (calls classified
against the peers' noise, the extra pair rounds, the intra-host and whole-job series, the
metric and the JSON record), then on namespace hosts under a real mpirun: a host link whose
tc rate the test switches 400 <-> 100 Mbit/s every 2 s, a link steady at 0.65 of the rate, a
healthy cluster under a CPU load generator, and the test-only switch flap inside the host."""
import json
import re
import subprocess
import sys
import threading

import pytest

from conftest import mpibench_lines
from mpibench.diagnose import checkverdict, fabricplan, intermittent, tomography, topology
from mpibench.results import checktext, metrics

from launch_helpers import RATE, QUARTER, check_on_hosts
from fakecluster import FakeCluster, rate_bits  # noqa: E402

needs_hosts = pytest.mark.usefixtures("hosts")
SIZE = 1 << 21
FAST, SLOW = 0.045, 0.180          # seconds per 2 MiB call at 400 and 100 Mbit/s


# ---- pure logic ----
def test_calls_are_slow_only_beyond_the_limit_and_the_peers_noise():
    assert intermittent.scatter([1.0] * 9 + [2.0]) == 1.0 and intermittent.scatter([1.0] * 5) == 0
    peers = [[1.0, 1.0, 1.1, 1.0], [1.0, 1.6, 1.0, 1.0], [1.0, 1.0, 1.0, 1.5]]
    assert intermittent.noise(peers, "pair") == pytest.approx(0.5)      # the median scatter
    assert intermittent.noise(peers[:1], "pair") == intermittent.FLOOR["pair"]     # at least
    assert intermittent.noise([], "intra") == intermittent.FLOOR["intra"]
    m = intermittent.calls([1.0, 1.2, 1.3, 1.5, 3.0], 1.25, 0.1)
    assert (m["slow"], m["fast"], m["calls"], m["slow_s"]) == (2, 2, 5, [1.5, 3.0])
    assert intermittent.calls([9.0], None, 0)["slow"] == 0


@pytest.mark.parametrize("measured, kind", [
    ([(0, 5)], "clean"), ([(5, 0)], "persistent"), ([(3, 0), (5, 0)], "persistent"),
    ([(2, 3)], "once"), ([(5, 0), (0, 5)], "once"), ([(2, 3), (1, 4)], "intermittent"),
    ([(5, 0), (5, 0), (0, 5)], "intermittent"), ([(2, 3), (0, 5), (0, 5)], "once"),
])
def test_classify(measured, kind):
    assert intermittent.classify([{"slow": s, "fast": f, "calls": 5} for s, f in measured]) == kind


def test_blame_names_the_link_shared_by_the_paths_with_slow_calls():
    slow, clean = {"slow": 2, "fast": 3, "calls": 5}, {"slow": 0, "fast": 5, "calls": 5}
    paths = {(0, 1): [slow], (2, 3): [clean], (1, 2): [clean], (0, 3): [slow]}
    b = intermittent.blame(paths, lambda p: [("nic", p[0], 0), ("nic", p[1], 0)])
    assert b["named"] == [("nic", 0, 0)] and not b["ties"]
    b = intermittent.blame({(0, 1): [slow], (2, 3): [clean]},
                           lambda p: [("nic", p[0], 0), ("nic", p[1], 0)])
    assert b["ties"] == [[("nic", 0, 0), ("nic", 1, 0)]]


def _judge(names, ppn=1, limits=None):
    members = {h: [ppn * i + k for k in range(ppn)] for i, h in enumerate(names)}
    config = {"collective": "all_reduce", "size": SIZE, "ranks_per_host": ppn,
              "world": ppn * len(names), "hosts": names, "iters": 10, "warmup": 1}
    return checkverdict.Judge(config, members, limits or {}, {h: None for h in names})


def _drive(names, times):
    """The pair rounds as check runs them (the plan's, then the judge's extra ones), one rank
    per host; times(a, b, k): each call's seconds of path a-b in round k. (judge, rounds)."""
    judge = _judge(names)
    fabric = tomography.Fabric(names, 1, topology.single(names))
    rounds, k = fabricplan.FabricRounds(fabric), 0
    while True:
        todo = rounds.next_round()
        if not todo:
            todo = judge.pair_extra(fabric, rounds.verdict())
            if not todo:
                break
            rounds.add_round(todo)
        records = [[{"from": a, "to": b, "times": times(a, b, k)} for a, b in todo]]
        result, _ = judge.pair_round(todo, records, 1.0, {})
        rounds.record(result)
        k += 1
    judge.pair_verdict(rounds.verdict(), fabric)
    judge.failing()
    return judge, rounds


def _steady(bad, share):
    return lambda a, b, k: [FAST / share if bad in (a, b) else FAST] * 10


def _flapping(bad, pattern):
    """pattern[k]: round k's calls on bad's paths, 'f' fast and 's' slow each."""
    return lambda a, b, k: [SLOW if bad in (a, b) and c == "s" else FAST
                            for c in pattern[min(k, len(pattern) - 1)]]


NAMES = ["h1", "h2", "h3", "h4"]


def test_a_flapping_link_is_intermittent_and_drains_nobody():
    judge, rounds = _drive(NAMES, _flapping(0, ["ffffssssss", "ssffffffff", "ffffffffff"]))
    doc = judge.doc
    [x] = doc["intermittent"]
    assert x["what"] == "h1 rail 0" and x["kind"] == "pair" and x["failed"] == 8
    assert x["of"] == 10 * sum(1 for r in doc["rounds"] for p in r if "h1" in p)
    assert x["with_slow_calls"] == 2 and x["slow_GBps"] == pytest.approx(SIZE / SLOW / 1e9)
    assert doc["failing_hosts"] == [] and not doc["suspects"] and not doc["transient"]
    assert judge.failure() == (f"check FAILED: 1 intermittent: h1 rail 0 (failed 8 of {x['of']} "
                               f"calls)")
    line = checktext.intermittent_line(x)
    assert re.match(r"# INTERMITTENT h1 rail 0: failed 8 of 20 calls, in 2 of 2 measurements; "
                    r"slow calls 0.012 GB/s, the others 0.047 GB/s \(slowest 0.012, fastest "
                    r"0.047\), spread \+-67%; slow: below min_busbw_GBps 0.0233 \(0.8 x the "
                    r"median pair of 2, .*\) by more than the peers' noise \(25%\); nobody "
                    r"drained for it$", line), line
    assert "INTERMITTENT rail 0: not drained for it" in judge.hosts["h1"]["reasons"]


def test_slow_calls_in_one_round_alone_are_retested_once_then_let_go():
    # a burst in round 1 on h1's path: one extra round, clean, and nothing named
    judge, rounds = _drive(NAMES, _flapping(0, ["ffffffffss", "ffffffffff"]))
    assert not judge.doc["intermittent"] and not judge.doc["suspects"]
    assert len(rounds.rounds) == 3 and judge.extra == 1 and judge.failure() is None


def test_a_clean_check_has_no_extra_round():
    judge, rounds = _drive(NAMES, lambda a, b, k: [FAST] * 10)
    assert len(rounds.rounds) == 2 and judge.extra == 0 and judge.failure() is None


@pytest.mark.parametrize("share", [0.5, 0.65])
def test_a_steady_slow_link_is_confirmed_and_drained(share):
    judge, rounds = _drive(NAMES, _steady(0, share))
    assert judge.doc["failing_hosts"] == ["h1"] and not judge.doc["intermittent"]
    assert judge.extra == checkverdict.EXTRA     # confirmed over the extra rounds


def test_a_link_slow_for_rounds_then_fast_is_intermittent_not_drained():
    # a 10 s period: every call of rounds 1-2 slow (the verdict names h1), fast afterwards
    judge, _ = _drive(NAMES, _flapping(0, ["s" * 10, "s" * 10, "f" * 10]))
    assert judge.doc["failing_hosts"] == [] and [x["what"] for x in judge.doc["intermittent"]] \
        == ["h1 rail 0"]


def _recs(judge, times, hosts=None):
    return [{"host": h, "seconds": sum(times[h]) / len(times[h]), "times": times[h],
             "bw_bytes": SIZE, "factor": 1.0} if h in times and (hosts is None or h in hosts) else None
            for h in judge.names for _ in judge.members[h]]


def test_a_host_slow_inside_on_some_calls_is_intermittent():
    names = ["h1", "h2", "h3"]
    judge = _judge(names, ppn=2)
    ok, flap = [0.010] * 6, [0.010, 0.040] * 3
    judge.intra(_recs(judge, {"h1": ok, "h2": flap, "h3": ok}))
    assert list(judge.suspects) == ["h2"]
    while steps := judge.intra_retests():
        judge.intra_retest(steps, [_recs(judge, {"h1": ok, "h2": flap, "h3": ok}, s) for s in steps])
    [x] = judge.doc["intermittent"]
    assert x["what"] == "h2 inside the host" and (x["failed"], x["of"]) == (6, 12)
    assert judge.hosts["h2"]["verdict"] == "PASS" and not judge.doc["transient"]
    # a burst once, then clean: transient, as before
    judge = _judge(names, ppn=2)
    judge.intra(_recs(judge, {"h1": ok, "h2": flap, "h3": ok}))
    while steps := judge.intra_retests():
        judge.intra_retest(steps, [_recs(judge, {"h1": ok, "h2": ok, "h3": ok}, s) for s in steps])
    assert not judge.doc["intermittent"] and [t["what"] for t in judge.doc["transient"]] == \
        ["h2 inside the host"]


def test_the_whole_job_with_slow_calls_twice_is_intermittent():
    judge = _judge(["h1", "h2"])
    flap = [0.010, 0.010, 0.010, 0.040] * 2
    judge.job(_recs(judge, {"h1": flap, "h2": flap}))
    assert judge.job_again()
    line = judge.job_retest(_recs(judge, {"h1": flap, "h2": flap}))
    assert line.endswith("INTERMITTENT, slow calls in both measurements, fast ones besides")
    [x] = judge.doc["intermittent"]
    assert (x["what"], x["failed"], x["of"]) == ("the whole job", 4, 16)
    judge = _judge(["h1", "h2"])
    judge.job(_recs(judge, {"h1": [0.010] * 8, "h2": [0.010] * 8}))
    assert not judge.job_again()


def test_the_metric_and_the_json_record():
    judge, _ = _drive(NAMES, _flapping(0, ["ffffssssss", "ssffffffff", "ffffffffff"]))
    [x] = judge.doc["intermittent"]
    text = metrics.render({"command": "check", "check": judge.doc, "exit": {"code": 1}})
    assert ('mpibench_check_intermittent_failed_calls{command="check",what="h1 rail 0",'
            'test="pair"} 8') in text
    assert f'mpibench_check_intermittent_calls{{command="check",what="h1 rail 0",test="pair"}} ' \
           f'{x["of"]}' in text
    assert "mpibench_check_passed{command=\"check\"} 0" in text
    assert set(x) >= {"what", "kind", "failed", "of", "measurements", "with_slow_calls", "slow_GBps",
                      "fast_GBps", "slowest_GBps", "fastest_GBps", "spread_pct", "noise_pct",
                      "threshold"}


# ---- on namespace hosts ----
SMALL = ["-b", "2M", "-n", "10", "-w", "1"]


def _run(tmp_path, cluster, extra_env=None, ppn=1, floor=True):
    """check on every host; floor: the intra-host figures of this two-core machine are noise,
    held to a low floor (as test_check does), else relative."""
    expect = tmp_path / "expect.json"
    expect.write_text('{"intra": {"min_busbw_GBps": 0.001}}')
    out = tmp_path / "c.json"
    spec = ",".join(f"{h}:{ppn}" for h in cluster.hosts)
    r = check_on_hosts(cluster, spec, [*SMALL, *(["--expect", expect] if floor else []),
                                       "--json", out], extra_env, timeout=240)
    doc = json.loads(out.read_text())["check"] if out.exists() else None
    return r, doc


class Flapper:
    """Switches one host link's tc rate between two rates every period seconds, beside the job."""

    def __init__(self, cluster, host, rates, period):
        self.c, self.host, self.rates, self.period = cluster, host, rates, period
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        k = 0
        while not self.stop.wait(self.period if k else 0):
            self.c.set_rate(self.host, self.rates[k % 2])
            k += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


@needs_hosts
def test_a_flapping_link_on_hosts_is_intermittent_and_nobody_is_drained(tmp_path):
    with FakeCluster(hosts=4, rates=RATE) as c:
        with Flapper(c, "h2", [QUARTER, RATE], 2.0):
            r, doc = _run(tmp_path, c)
    assert r.returncode == 1, r.stdout + r.stderr
    print("\n".join(x for x in r.stdout.splitlines() if x.startswith(("# 2.", "# INTER", "# TRANS"))))
    assert doc["failing_hosts"] == [] and "scontrol" not in r.stdout, r.stdout
    assert [x["what"] for x in doc["intermittent"] if x["kind"] == "pair"] == ["h2 rail 0"], r.stdout
    assert re.search(r"^# INTERMITTENT h2 rail 0: failed \d+ of \d+ calls, in \d of \d "
                     r"measurements; .*; nobody drained for it$", r.stdout, re.M), r.stdout
    [line] = mpibench_lines(r.stderr)
    assert line.startswith("mpibench: check FAILED: ") and "h2 rail 0 (failed " in line, line


@needs_hosts
def test_a_steady_link_at_065_is_named_not_intermittent(tmp_path):
    slow = f"{rate_bits(RATE) * 0.65 / 1e6:.0f}mbit"
    with FakeCluster(hosts=4, rates={"*": RATE, "h3": slow}) as c:
        r, doc = _run(tmp_path, c)
    assert r.returncode == 1, r.stdout + r.stderr
    assert doc["failing_hosts"] == ["h3"] and not doc["intermittent"], r.stdout
    assert "# FAILING HOSTS (1 of 4): h3" in r.stdout


@needs_hosts
def test_a_healthy_cluster_under_load_has_no_intermittent_report(tmp_path):
    load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with FakeCluster(hosts=4, rates=RATE) as c:
            r, doc = _run(tmp_path, c, ppn=2)
    finally:
        load.kill()
        load.wait()
    assert r.returncode == 0, r.stdout + r.stderr
    assert not doc["intermittent"] and not doc["failing_hosts"] and "INTERMITTENT" not in r.stdout


@needs_hosts
def test_a_host_slow_inside_on_every_second_call_is_intermittent(tmp_path):
    # rank 2 is h2's first: the test-only switch stretches every second call of its
    # measurements inside the host 200 times (the hosts' calls all at once scatter by more
    # than 20 times here), and of the whole job's on rank 0 20 times
    with FakeCluster(hosts=3, rates=RATE) as c:
        r, doc = _run(tmp_path, c, {"MPIBENCH_FAULT": "flap:2:intra/200,flap:0:job/20"}, ppn=2,
                      floor=False)
    assert r.returncode == 1, r.stdout + r.stderr
    what = {x["what"]: x for x in doc["intermittent"]}
    assert {"h2 inside the host", "the whole job"} <= set(what), r.stdout
    assert doc["failing_hosts"] == [] and what["the whole job"]["failed"] >= 2
    assert re.search(r"^# 3\. retest: the whole job again: .*: INTERMITTENT", r.stdout, re.M)

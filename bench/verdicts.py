"""check's misses and false alarms, with their uncertainty: randomized scenarios on namespace
hosts (launch/fakecluster.py, links limited by tc), each a fresh cluster and one `check`.

    python bench/verdicts.py [--runs 7] [--seed 1] [--kinds healthy,host,rail,uplink,flap2,
                             flap10,inside] [--severities 0.5,0.65,0.8] [--load 0.5]
                             [-b 2M] [-n 10] [-w 2] [--lock FILE] [--log FILE] [--quick]
    python bench/verdicts.py --summarize FILE...     # the table of logged runs

Kinds, one row per kind and severity (the share of the rate the fault leaves; --runs runs
each, healthy --healthy-runs):
  healthy  every link at the rate; 2, 4, 6 or 8 hosts, 1 or 2 ranks per host, 1 or 2 rails
  host     one host's link at the severity (4 or 6 hosts, 1 or 2 ranks)
  rail     one host's eth1 at the severity (4 hosts x 2 ranks on 2 rails)
  uplink   one leaf's uplink at the severity (6 hosts under 3 leaves)
  inside   one host's ranks slowed inside the host to the severity (4 hosts x 2 ranks; the
           test-only switch slow:RANK:intra/F, F = 1 / severity: tc cannot slow a host's own
           memory)
  flap2    one host's link switched between the rate and a quarter of it every 2 s by a loop
           beside the job (4 or 6 hosts)
  flap10   the same, every 10 s
With probability --load a CPU load generator (one process spinning) runs through the check.
Thresholds are check's defaults (relative). A steady fault is found when its host is drained
(host, inside), or its rail or uplink named suspect; a flapping one when check reports its
host's link INTERMITTENT and drains nobody for it. Per row: runs, faults found with the recall's
95% Clopper-Pearson interval, runs with an INTERMITTENT report (of the fault, for flap kinds;
of anything, else), healthy hosts drained of all healthy hosts with the 95% upper bound of
that rate, other suspects named, transient reports, and check's wall time (mpirun to exit)
median and max, and its median over the healthy rows'. --lock FILE takes that lock around
each run alone (a shared machine's other tests run between). Run as root.
"""
import argparse
import fcntl
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from statistics import median

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..", "launch")]
from launch_helpers import RATE, check_on_hosts  # noqa: E402
from fakecluster import FakeCluster, rate_bits, split_leaves  # noqa: E402

KINDS = ("healthy", "host", "rail", "uplink", "inside", "flap2", "flap10")
STEADY = ("host", "rail", "uplink", "inside")
FLAP = {"flap2": 2.0, "flap10": 10.0}
CONFIDENCE = 0.95


# ---- Clopper-Pearson ----
def _binom_tail(k, n, p, upper):
    """P(X >= k) (upper) or P(X <= k) for X ~ Binomial(n, p), summed in logs."""
    if p <= 0:
        return 1.0 if (k <= 0 if upper else True) else 0.0
    if p >= 1:
        return 1.0 if (True if upper else k >= n) else 0.0
    terms = range(k, n + 1) if upper else range(0, k + 1)
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in terms]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _solve(f, target, increasing):
    """p in [0, 1] with f(p) = target, f monotone, by bisection (1e-12)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def clopper_pearson(k, n, confidence=CONFIDENCE):
    """The exact two-sided interval (low, high) of a proportion seen k times in n: low solves
    P(X >= k | low) = a/2, high P(X <= k | high) = a/2 (a = 1 - confidence); the beta
    quantiles of Clopper and Pearson, without a statistics library. (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    a = (1 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: _binom_tail(k, n, p, True), a, True)
    high = 1.0 if k == n else _solve(lambda p: _binom_tail(k, n, p, False), a, False)
    return low, high


# ---- scenarios ----
def scenario(kind, severity, rng, load):
    """One randomized scenario: its cluster, its check's layout and the fault planted."""
    slow = f"{rate_bits(RATE) * severity / 1e6:.0f}mbit" if severity else None
    s = {"kind": kind, "severity": severity, "load": rng.random() < load, "fault": None,
         "leaves": None, "uplink_rates": None, "rates": {"*": RATE}, "flap": None, "env": {}}
    if kind == "healthy":
        s.update(hosts=rng.choice((2, 4, 6, 8)), ppn=rng.choice((1, 2)))
        s["rails"] = rng.choice((1, 2)) if s["ppn"] == 2 else 1
    elif kind == "host":
        s.update(hosts=rng.choice((4, 6)), ppn=rng.choice((1, 2)), rails=1)
        bad = f"h{rng.randrange(1, s['hosts'] + 1)}"
        s["rates"][bad], s["fault"] = slow, ("host", bad)
    elif kind == "rail":
        s.update(hosts=4, ppn=2, rails=2)
        bad = f"h{rng.randrange(1, 5)}"
        s["rates"][f"{bad}:eth1"], s["fault"] = slow, ("suspect", f"{bad} rail 1")
    elif kind == "uplink":
        s.update(hosts=6, ppn=1, rails=1)
        s["leaves"] = split_leaves([f"h{i}" for i in range(1, 7)], 3)
        leaf = rng.choice(list(s["leaves"]))
        s["uplink_rates"], s["fault"] = {leaf: slow}, ("suspect", f"uplink {leaf}-spine1")
    elif kind == "inside":
        s.update(hosts=4, ppn=2, rails=1)
        k = rng.randrange(4)
        s["env"] = {"MPIBENCH_FAULT": f"slow:{2 * k}:intra/{1 / severity:.4g}"}
        s["fault"] = ("host", f"h{k + 1}")
    else:
        s.update(hosts=rng.choice((4, 6)), ppn=1, rails=1)
        bad = f"h{rng.randrange(1, s['hosts'] + 1)}"
        s["flap"] = (bad, FLAP[kind], rng.random() < 0.5)      # which rate it starts at
        s["fault"] = ("intermittent", f"{bad} rail 0")
    return s


class Flapper:
    """One host link's tc rate switched between the rate and a quarter of it every period s."""

    def __init__(self, cluster, host, period, slow_first):
        quarter = f"{rate_bits(RATE) / 4 / 1e6:.0f}mbit"
        self.c, self.host, self.period = cluster, host, period
        self.rates = [quarter, RATE] if slow_first else [RATE, quarter]
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


@contextmanager
def locked(path):
    """The lock at path held (nothing without one)."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_one(s, args, tmp):
    """Runs the scenario's check; its outcome."""
    out = os.path.join(tmp, "check.json")
    extra = ["--rails", "eth0,eth1"] if s["rails"] == 2 else []
    load = None
    with FakeCluster(hosts=s["hosts"], rails=s["rails"], rates=s["rates"], leaves=s["leaves"],
                     uplink_rates=s["uplink_rates"]) as c:
        if s["leaves"]:
            topo = os.path.join(tmp, "topology.conf")
            with open(topo, "w") as f:
                f.write(c.topology_conf())
            extra += ["--topology", topo]
        spec = ",".join(f"{h}:{s['ppn']}" for h in c.hosts)
        if s["load"]:
            load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        flap = Flapper(c, s["flap"][0], s["flap"][1], s["flap"][2]) if s["flap"] else None
        t0 = time.perf_counter()
        try:
            if flap:
                flap.__enter__()
            r = check_on_hosts(c, spec, ["-b", args.b, "-n", args.n, "-w", args.w, "--json", out,
                                         *extra], s["env"] or None, timeout=args.timeout)
        finally:
            seconds = time.perf_counter() - t0
            if flap:
                flap.__exit__()
            if load is not None:
                load.kill()
                load.wait()
    if not os.path.exists(out):
        return {"error": f"exit {r.returncode}: {(r.stdout + r.stderr)[-600:]}", "seconds": seconds}
    doc = json.load(open(out))["check"]
    os.remove(out)
    return outcome(s, doc, r.returncode, seconds)


def outcome(s, doc, code, seconds):
    """What one check said of its scenario: found, healthy hosts drained, the rest named."""
    drained, suspects = doc.get("failing_hosts", []), doc.get("suspects", [])
    flaky = [x["what"] for x in doc.get("intermittent", [])]
    kind, what = s["fault"] or (None, None)
    faulty_host = what if kind == "host" else what.split()[0] if kind == "intermittent" else None
    if kind == "host":
        found = what in drained
    elif kind == "suspect":
        found = any(x.startswith(what) for x in suspects)
    elif kind == "intermittent":
        found = what in flaky and faulty_host not in drained
    else:
        found = None
    return {"exit": code, "seconds": seconds, "found": found,
            "healthy_hosts": s["hosts"] - (1 if faulty_host else 0),
            "healthy_drained": [h for h in drained if h != faulty_host],
            "other_suspects": [x for x in suspects if not (kind == "suspect" and x.startswith(what))],
            "intermittent": flaky, "fault_intermittent": kind == "intermittent" and what in flaky,
            "transient": len(doc.get("transient", [])),
            "why": {e["host"]: e["reasons"] for e in doc["hosts"]
                    if e["host"] in drained and e["host"] != faulty_host}}


def interval_text(k, n):
    lo, hi = clopper_pearson(k, n)
    return f"{k / n:.2f} ({lo:.2f}-{hi:.2f})" if n else "-"


def table(results):
    """The markdown table, a row per (kind, severity) in the order run."""
    healthy = [o["seconds"] for (kind, _), outs in results.items() if kind == "healthy"
               for o in outs if "error" not in o]
    base = median(healthy) if healthy else None
    lines = ["| kind | severity | runs | found | recall (95% CI) | intermittent reports "
             "| healthy hosts drained (95% upper) | other suspects | transient reports "
             "| check s (median, max) | x healthy median |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (kind, sev), outs in results.items():
        ok = [o for o in outs if "error" not in o]
        secs = [o["seconds"] for o in ok] or [0.0]
        faulty = [o for o in ok if o["found"] is not None]
        found = sum(bool(o["found"]) for o in faulty)
        flaky = sum(bool(o["fault_intermittent"] if kind in FLAP else o["intermittent"]) for o in ok)
        drained = sum(len(o["healthy_drained"]) for o in ok)
        hosts = sum(o["healthy_hosts"] for o in ok)
        lines.append(
            f"| {kind} | {sev if sev else '-'} | {len(ok)}"
            + (f" ({len(outs) - len(ok)} errors)" if len(ok) < len(outs) else "")
            + (f" | {found} | {interval_text(found, len(faulty))}" if faulty else " | - | -")
            + f" | {flaky} | {drained} of {hosts} (<= {clopper_pearson(drained, hosts)[1]:.3f})"
            + f" | {sum(len(o['other_suspects']) for o in ok)} | {sum(o['transient'] for o in ok)}"
            + f" | {median(secs):.1f}, {max(secs):.1f} | "
            + (f"{median(secs) / base:.2f} |" if base else "- |"))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per fault kind and severity")
    ap.add_argument("--healthy-runs", type=int, default=None, help="healthy runs (default --runs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--severities", default="0.5,0.65,0.8")
    ap.add_argument("--load", type=float, default=0.5, help="share of runs with a load generator")
    ap.add_argument("-b", default="2M")
    ap.add_argument("-n", default="10")
    ap.add_argument("-w", default="2")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--lock", help="a lock file taken around each run alone")
    ap.add_argument("--log", help="append each run's scenario and outcome to FILE (JSON lines)")
    ap.add_argument("--summarize", metavar="FILE", nargs="+",
                    help="print the table of the runs logged in FILE(s) and stop")
    ap.add_argument("--quick", action="store_true",
                    help="two small runs: healthy 2 hosts x 2 ranks, a host of 4 at 0.5 (CI)")
    a = ap.parse_args()
    if a.summarize:
        results = {}
        for path in a.summarize:
            with open(path) as f:
                for line in f:
                    o = json.loads(line)
                    results.setdefault((o["kind"], o["severity"]), []).append(o)
        print("\n".join(table(results)))
        return
    rng = random.Random(a.seed)
    kinds = a.kinds.split(",")
    severities = [float(x) for x in a.severities.split(",")]
    if a.quick:
        host = scenario("host", 0.5, rng, 0)
        while host["hosts"] != 4:
            host = scenario("host", 0.5, rng, 0)
        plan = [dict(scenario("healthy", None, rng, 0), hosts=2, ppn=2, rails=1), dict(host, ppn=1)]
        a.n, a.w = "3", "1"
    else:
        rows = [(k, None) for k in kinds if k not in STEADY] + [
            (k, sev) for k in kinds if k in STEADY for sev in severities]
        plan = []
        for j in range(max(a.runs, a.healthy_runs or 0)):      # interleaved: drift spreads evenly
            for k, sev in rows:
                if j < (a.healthy_runs or a.runs if k == "healthy" else a.runs):
                    plan.append(scenario(k, sev, rng, a.load))
    print(f"# check -b {a.b} -n {a.n} -w {a.w} on namespace hosts, links at {RATE}; "
          f"{len(plan)} runs, seed {a.seed}", flush=True)
    results = {}
    for k, s in enumerate(plan, 1):
        with tempfile.TemporaryDirectory() as tmp, locked(a.lock):
            o = run_one(s, a, tmp)
        results.setdefault((s["kind"], s["severity"]), []).append(o)
        if a.log:
            with open(a.log, "a") as f:
                f.write(json.dumps(dict(o, kind=s["kind"], severity=s["severity"], hosts=s["hosts"],
                                        ppn=s["ppn"], rails=s["rails"], load=s["load"])) + "\n")
        fault = (f"{s['fault'][1]} at {s['severity']:g}" if s["severity"] else
                 f"{s['fault'][1]} switched every {s['flap'][1]:g} s" if s["flap"] else "-")
        print(f"# run {k}: {s['kind']}, {s['hosts']} hosts x {s['ppn']}, {s['rails']} "
              f"rail(s), load {'on' if s['load'] else 'off'}, fault {fault}: "
              + (o["error"] if "error" in o else
                 f"exit {o['exit']}, found {o['found']}, healthy drained {o['healthy_drained']}, "
                 f"other suspects {o['other_suspects']}, intermittent {o['intermittent']}, "
                 f"transient {o['transient']}, {o['seconds']:.1f} s"
                 + "".join(f"; {h} drained for: {'; '.join(why)}" for h, why in o["why"].items())),
              flush=True)
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()

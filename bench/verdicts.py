"""check's false alarms and misses: K randomized scenarios on namespace hosts
(launch/fakecluster.py, links limited by tc), each a fresh cluster and one `check`.

    python bench/verdicts.py [--runs 12] [--seed 1] [--kinds healthy,host,rail,uplink]
                             [--load 0.5] [-b 2M] [-n 5] [-w 2] [--quick]

Kinds: healthy (every link at --rate; 2, 4 or 6 hosts, 1 or 2 ranks per host, 1 or 2
rails); host (one host's links at 0.25-0.5 of the rate; 4 or 6 hosts); rail (one host's
eth1 at 0.25-0.5 of the rate; 4 hosts x 2 ranks on 2 rails); uplink (6 hosts under 3
leaves, one leaf's uplink at 0.25-0.5 of the rate). With probability --load a CPU load
generator (one process spinning, on top of whatever else the machine runs) runs
through the check. Thresholds are check's defaults (relative). Prints one line per run
and, per kind: healthy hosts drained, faults found, faults missed, other suspects
named, transient reports and check's wall time (mpirun to exit, median and max). A
fault is found when its host is drained, its rail or uplink named. Run as root.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from statistics import median

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..", "launch")]
from launch_helpers import RATE, check_on_hosts  # noqa: E402
from fakecluster import FakeCluster, rate_bits, split_leaves  # noqa: E402

KINDS = ("healthy", "host", "rail", "uplink")


def scenario(kind, rng, load):
    """One randomized scenario: its cluster, its check's layout and the fault planted."""
    share = rng.uniform(0.25, 0.5)
    slow = f"{rate_bits(RATE) * share / 1e6:.0f}mbit"
    s = {"kind": kind, "load": rng.random() < load, "share": None, "fault": None,
         "leaves": None, "uplink_rates": None, "rates": {"*": RATE}}
    if kind == "healthy":
        s.update(hosts=rng.choice((2, 4, 6)), ppn=rng.choice((1, 2)))
        s["rails"] = rng.choice((1, 2)) if s["ppn"] == 2 else 1
    elif kind == "host":
        s.update(hosts=rng.choice((4, 6)), ppn=rng.choice((1, 2)), rails=1)
        bad = f"h{rng.randrange(1, s['hosts'] + 1)}"
        s["rates"][bad], s["fault"] = slow, ("host", bad)
    elif kind == "rail":
        s.update(hosts=4, ppn=2, rails=2)
        bad = f"h{rng.randrange(1, 5)}"
        s["rates"][f"{bad}:eth1"], s["fault"] = slow, ("suspect", f"{bad} rail 1")
    else:
        s.update(hosts=6, ppn=1, rails=1)
        s["leaves"] = split_leaves([f"h{i}" for i in range(1, 7)], 3)
        leaf = rng.choice(list(s["leaves"]))
        s["uplink_rates"], s["fault"] = {leaf: slow}, ("suspect", f"uplink {leaf}-spine1")
    if s["fault"]:
        s["share"] = share
    return s


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
        t0 = time.perf_counter()
        try:
            r = check_on_hosts(c, spec, ["-b", args.b, "-n", args.n, "-w", args.w, "--json", out,
                                         *extra], timeout=args.timeout)
        finally:
            if load is not None:
                load.kill()
                load.wait()
        seconds = time.perf_counter() - t0
    if not os.path.exists(out):
        return {"error": f"exit {r.returncode}: {(r.stdout + r.stderr)[-600:]}", "seconds": seconds}
    doc = json.load(open(out))["check"]
    os.remove(out)
    drained, suspects = doc.get("failing_hosts", []), doc.get("suspects", [])
    kind, what = s["fault"] or (None, None)
    found = (what in drained) if kind == "host" else any(x.startswith(what) for x in suspects) \
        if kind else None
    return {"exit": r.returncode, "seconds": seconds, "found": found,
            "healthy_drained": [h for h in drained if not (kind == "host" and h == what)],
            "other_suspects": [x for x in suspects if not (kind == "suspect" and x.startswith(what))],
            "transient": len(doc.get("transient", [])),
            "why": {e["host"]: e["reasons"] for e in doc["hosts"]
                    if e["host"] in drained and not (kind == "host" and e["host"] == what)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--load", type=float, default=0.5, help="share of runs with a load generator")
    ap.add_argument("-b", default="2M")
    ap.add_argument("-n", default="5")
    ap.add_argument("-w", default="2")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true",
                    help="two small runs: healthy 2 hosts x 2 ranks, a slow host of 4 (CI)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    kinds = a.kinds.split(",")
    if a.quick:
        host = scenario("host", rng, 0)
        while host["hosts"] != 4:
            host = scenario("host", rng, 0)
        plan = [dict(scenario("healthy", rng, 0), hosts=2, ppn=2, rails=1), dict(host, ppn=1)]
        a.n, a.w = "3", "1"
    else:
        plan = [scenario(kinds[k % len(kinds)], rng, a.load) for k in range(a.runs)]
    print(f"# check -b {a.b} -n {a.n} -w {a.w} on namespace hosts, links at {RATE}; "
          f"{len(plan)} runs, seed {a.seed}")
    results = {}
    for k, s in enumerate(plan, 1):
        with tempfile.TemporaryDirectory() as tmp:
            o = run_one(s, a, tmp)
        results.setdefault(s["kind"], []).append(o)
        fault = f"{s['fault'][1]} at {s['share']:.2f}" if s["fault"] else "-"
        print(f"# run {k}: {s['kind']}, {s['hosts']} hosts x {s['ppn']}, {s['rails']} "
              f"rail(s), load {'on' if s['load'] else 'off'}, fault {fault}: "
              + (o["error"] if "error" in o else
                 f"exit {o['exit']}, found {o['found']}, healthy drained {o['healthy_drained']}, "
                 f"other suspects {o['other_suspects']}, transient {o['transient']}, "
                 f"{o['seconds']:.1f} s" + "".join(f"; {h} drained for: {'; '.join(why)}"
                                                  for h, why in o["why"].items())), flush=True)
    print("| kind | runs | healthy hosts drained | faults found | faults missed | other suspects "
          "| transient reports | check s (median, max) |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, outs in results.items():
        ok = [o for o in outs if "error" not in o]
        secs = [o["seconds"] for o in ok] or [0.0]
        faulty = [o for o in ok if o["found"] is not None]
        print(f"| {kind} | {len(ok)}" + (f" ({len(outs) - len(ok)} errors)" if len(ok) < len(outs) else "")
              + f" | {sum(len(o['healthy_drained']) for o in ok)}"
              + (f" | {sum(o['found'] for o in faulty)} | {sum(not o['found'] for o in faulty)}"
                 if faulty else " | - | -")
              + f" | {sum(len(o['other_suspects']) for o in ok)} | {sum(o['transient'] for o in ok)}"
              f" | {median(secs):.1f}, {max(secs):.1f} |")


if __name__ == "__main__":
    main()

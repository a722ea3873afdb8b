"""Rank 0's work in check's pair rounds: planning and verdicts, without processes.

    .venv/bin/python bench/fabric_plan.py [--hosts 1024,2048,4096,8192] [--rails 8] [--seeds 5] [--quick]

A two-level fat tree (32 hosts per leaf, one spine) with the scale test's faults planted
at random (tests/test_fabric.py: 5 bad hosts, 5 bad rails, 2 bad uplinks, 1 bad rail
switch); the simulated fabric's judging is left out of the time. Prints per host count
the rounds, the seconds per check (the fastest seed) and the microseconds per host x rail, which stay flat
when the work is O(hosts x rails). Target (printed, not asserted): flat within 2x from
1024 to 8192 hosts.
"""
import argparse
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from mpibench.diagnose import fabricplan, tomography  # noqa: E402
from test_fabric import _fat_tree, _plant  # noqa: E402


def one(hosts, rails, seed):
    names, topo = _fat_tree(hosts)
    fabric = tomography.Fabric(names, rails, topo)
    bad = _plant(names, topo, rails, random.Random(seed))[-1]
    rounds = fabricplan.FabricRounds(fabric)
    spent = 0.0
    while True:
        t0 = time.perf_counter()
        pairs = rounds.next_round()
        spent += time.perf_counter() - t0
        if not pairs:
            break
        results = {(a, b): [not (set(fabric.path(a, b, r)) & bad) for r in range(rails)]
                   for a, b in pairs}
        t0 = time.perf_counter()
        rounds.record(results)
        spent += time.perf_counter() - t0
    t0 = time.perf_counter()
    v = rounds.verdict()
    spent += time.perf_counter() - t0
    return spent, v["rounds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="1024,2048,4096,8192")
    ap.add_argument("--rails", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="256 and 512 hosts, one seed (CI)")
    a = ap.parse_args()
    if a.quick:
        a.hosts, a.seeds = "256,512", 1
    print(f"{'hosts':>6} {'rails':>5} {'rounds':>10} {'s/check':>8} {'us per host x rail':>19}")
    per = []
    for hosts in (int(x) for x in a.hosts.split(",")):
        runs = [one(hosts, a.rails, seed) for seed in range(a.seeds)]
        s = min(t for t, _ in runs)            # the least disturbed run on a shared machine
        rounds = ",".join(str(r) for _, r in runs)
        per.append(s / (hosts * a.rails) * 1e6)
        print(f"{hosts:>6} {a.rails:>5} {rounds:>10} {s:>8.3f} {per[-1]:>19.2f}")
    print(f"# largest / smallest us per host x rail: {max(per) / min(per):.2f} "
          f"(target: under 2, i.e. O(hosts x rails))")


if __name__ == "__main__":
    main()

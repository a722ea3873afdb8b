"""verify's false alarms and misses: runs of `mpibench verify` on the correct harness (half
of them beside a CPU load generator) and as many with a planted timer error
(MPIBENCH_FAULT=early:R:X on every rank: mpibench's loop reports 1/X of its time), each
counted by exit code and by the timer checks' verdicts. On one host (--np ranks on
loopback), or with --rate on two namespace hosts (launch/fakecluster.py, root), one rank
each, whose tc-limited link sets the time.

    python bench/verify_alarms.py [--runs 10] [--np 2] [--load 2] [--every 2] [--early 1.25]
                                  [--only correct|planted] [--budget 60] [--rate 200mbit]
                                  [--quick] [-- VERIFY-ARGS]

--load N: N busy processes beside every --every'th run (the machine's own load comes on top);
"avg" is the 1-minute load average as each run ended. The 8 B timer (INFO) is left out.
Target: exit 1 in none of the correct runs, in every run with the planted error.
--quick (seconds, for CI): one run of each kind, 1 MiB only, 2 short rounds, no budget.
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.dirname(sys.executable)      # the venv this runs in: its mpirun and python
MPIRUN = os.path.join(BIN, "mpirun")
BUSY = "while True: pass"
sys.path.insert(0, os.path.join(ROOT, "launch"))
sys.path.insert(0, ROOT)
from mpibench.measure.sizes import format_size  # noqa: E402  (the checkout, put on sys.path above)


def verify(args, env, out, hosts):
    """One verify run (on the namespace hosts when there are some): (exit code, its timer
    checks, seconds)."""
    argv = [os.path.join(BIN, "python"), "-m", "mpibench", "verify", "--iperf-seconds", "0",
            "--budget", str(args.budget), "--json", out, *args.verify]
    t0 = time.monotonic()
    if hosts is not None:
        done = hosts.mpirun(argv, ppn=1, mpirun=MPIRUN, env=env, timeout=900)
        hosts._kill_strays()
    else:
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        done = subprocess.run([MPIRUN, *root, "--oversubscribe", "-np", str(args.np), *argv],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    took = time.monotonic() - t0
    if not os.path.exists(out):
        print(done.stdout[-2000:], done.stderr[-2000:])
        return done.returncode, [], took
    with open(out) as f:
        found = json.load(f)["verify"]
    pairs = {f"timer {format_size(int(s))}": len(t["bare_s"]) // 2
             for s, t in found["timers"].items()}
    return done.returncode, [dict(c, pairs=pairs.get(c["check"], "")) for c in found["checks"]
                             if c["check"].startswith("timer ")], took


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs of each kind")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--load", type=int, default=2, help="busy processes beside every --every'th run")
    ap.add_argument("--every", type=int, default=2, help="1: the load beside every run")
    ap.add_argument("--only", choices=("correct", "planted"), help="runs of one kind only")
    ap.add_argument("--early", type=float, default=1.25, help="the planted error's factor")
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--rate", help="two namespace hosts, one rank each, links at RATE (root)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("verify", nargs="*", help="more arguments for verify (after --)")
    a = ap.parse_args()
    if a.rate:
        a.np = 2
    if a.quick:
        a.runs, a.budget = 1, 0
        a.verify += ["--sizes", "1M", "--rounds", "2", "-n", "3", "-w", "1", "--check-size", "1K"]
    base = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    base.pop("MPIBENCH_FAULT", None)
    planted = ",".join(f"early:{r}:{a.early:g}" for r in range(a.np))
    kinds = [("correct", {}), (f"early {a.early:g}", {"MPIBENCH_FAULT": planted,
                                                      "MPIBENCH_TESTING": "1"})]
    if a.only:
        kinds = kinds[:1] if a.only == "correct" else kinds[1:]
    where = (f"2 namespace hosts x 1 rank, links at {a.rate}" if a.rate
             else f"1 host x {a.np} ranks")
    print(f"# verify on {where}, {a.runs} runs of {a.only or 'each'} kind, budget {a.budget:g} s, "
          f"{' '.join(a.verify) or 'default sizes and rounds'}; load: {a.load} busy "
          f"processes beside {'every' if a.every == 1 else f'one run in {a.every}'}")
    print(f"{'kind':<12} {'run':>3} {'load':>4} {'avg':>5} {'exit':>4} {'s':>6}  "
          f"timers (ratio, interval, verdict, pairs of rounds)")
    exits = {k: [] for k, _ in kinds}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        hosts = None
        if a.rate:
            from fakecluster import FakeCluster
            hosts = stack.enter_context(FakeCluster(hosts=2, rates=a.rate))
        for k in range(a.runs):
            for kind, extra in kinds:
                load = a.load if (k + 1) % a.every == 0 else 0
                busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(load)]
                try:
                    rc, timers, took = verify(a, dict(base, **extra),
                                              os.path.join(tmp, f"{kind[:5]}{k}.json"), hosts)
                finally:
                    for p in busy:
                        p.kill()
                        p.wait()
                exits[kind].append(rc)
                cells = "; ".join(
                    f"{c['check'][6:]} {c['ratio']:.3f}"
                    + (" [{:.3f}-{:.3f}]".format(*c["interval"]) if c.get("interval") else "")
                    + f" {c['verdict']} {c['pairs']}" for c in timers if c["check"] != "timer 8 B")
                print(f"{kind:<12} {k + 1:>3} {load:>4} {os.getloadavg()[0]:5.1f} {rc:>4} "
                      f"{took:6.1f}  {cells}", flush=True)
    for kind, _ in kinds:
        rcs = exits[kind]
        print(f"# {kind} harness: exit 1 in {rcs.count(1)} of {len(rcs)} runs, exit 0 in "
              f"{rcs.count(0)}" + ("" if kind == "correct" else f" (planted: {planted})"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Check `mpibench predict` for real: fake hosts in network namespaces, every host link
throttled to the same rate; measure at 2 and 3 hosts, predict 4, measure 4, print the
error. Needs root (launch/fakecluster.py).

    .venv/bin/python bench/predict_scaling.py [--rate 500mbit] [--hosts 2,3] [--target 4]
        [--dir DIR] [--quick] [-- RUN OPTIONS]   (default run options: all_reduce,all_gather 64K..16M)

--quick (seconds, for CI): 2 and 3 hosts measured, 4 predicted and measured, all_reduce
64K..256K at 1gbit.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "launch"))
from fakecluster import FakeCluster  # noqa: E402

RUN = ["--collectives", "all_reduce,all_gather", "-b", "64K", "-e", "16M", "-f", "4",
       "-n", "5", "-w", "1", "--probe-iters", "0"]


QUICK = ["--collectives", "all_reduce", "-b", "64K", "-e", "256K", "-f", "4", "-n", "3",
         "-w", "1", "--probe-iters", "0", "--link-iters", "0"]


def measure(hosts, rate, path, run_args=RUN, timeout=300):
    """One mpibench run on `hosts` fake hosts, one rank each, results in path."""
    with FakeCluster(hosts=hosts, rates=rate) as c:
        return c.mpirun([sys.executable, "-m", "mpibench", "run", *run_args, "--json", path],
                        ppn=1, timeout=timeout,
                        env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT))


def predict(paths, target, check):
    return subprocess.run([sys.executable, "-m", "mpibench", "predict", *paths,
                           "--hosts", str(target), "--measured", check],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", default="500mbit")
    p.add_argument("--hosts", default="2,3")
    p.add_argument("--target", type=int, default=4)
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true",
                   help="seconds, not minutes: 2, 3 and 4 hosts, small sizes")
    p.add_argument("run", nargs=argparse.REMAINDER)
    args = p.parse_args()
    run_args = [a for a in args.run if a != "--"] or (QUICK if args.quick else RUN)
    if args.quick:
        args.rate, args.hosts, args.target = "1gbit", "2,3", 4
    folder = args.dir or tempfile.mkdtemp(prefix="mpibench-predict.")
    paths = {}
    for n in [int(x) for x in args.hosts.split(",")] + [args.target]:
        paths[n] = os.path.join(folder, f"hosts{n}.json")
        done = measure(n, args.rate, paths[n], run_args)
        print(f"# measured {n} hosts at {args.rate}: exit code {done.returncode}, {paths[n]}")
        if done.returncode:
            sys.exit(done.stderr)
    done = predict([paths[n] for n in paths if n != args.target], args.target, paths[args.target])
    print(done.stdout + done.stderr, end="")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()

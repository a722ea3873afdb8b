"""What a second host costs a DDP step: 1 host x 2 ranks against 2 hosts x 1 rank, with
the hosts' links at each given rate (namespace hosts, launch/fakecluster.py; root only).

    python bench/train_hosts.py [--rates 1gbit,100mbit] [--quick] [-- TRAIN OPTIONS...]

--quick (seconds, for CI): one rate (1gbit), 2 steps after 1 warm-up.

Every run is `mpibench train` with the same options and --scale-from a run of one rank
alone, so the efficiency column is (throughput / one rank's) / ranks. Prints a markdown
table: placement, link, step time, exposed share, hidden share, scaling efficiency.
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "launch"))

from fakecluster import FakeCluster  # noqa: E402

PYTHON = sys.executable
MPIRUN = os.path.join(os.path.dirname(PYTHON), "mpirun")


def train(c, ppn, options, path, baseline=None):
    argv = [PYTHON, "-m", "mpibench", "train", *options, "--json", path]
    if baseline:
        argv += ["--scale-from", baseline]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    done = c.mpirun(argv, ppn=ppn, mpirun=MPIRUN, env=env, timeout=900)
    if done.returncode != 0:
        sys.exit(f"train failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    with open(path) as f:
        return json.load(f)["train"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rates", default="1gbit,100mbit")
    p.add_argument("--quick", action="store_true", help="seconds, not minutes: one rate, 2 steps")
    p.add_argument("options", nargs=argparse.REMAINDER)
    args = p.parse_args()
    quick = ["--steps", "2", "--warmup", "1", "--alone-iters", "1"]
    options = [o for o in args.options if o != "--"] or (
        quick if args.quick else ["--steps", "8", "--warmup", "2"])
    if args.quick:
        args.rates = "1gbit"
    folder = tempfile.mkdtemp(prefix="train-hosts-")
    one = os.path.join(folder, "one-rank.json")
    rows = []
    for i, rate in enumerate(args.rates.split(",")):
        with FakeCluster(hosts=2, rates=rate) as c:
            if i == 0:
                train(c, {"h1": 1}, options, one)
                local = train(c, {"h1": 2}, options, os.path.join(folder, "one-host.json"), one)
                rows.append(("1 host x 2 ranks", "-", local))
            remote = train(c, 1, options, os.path.join(folder, f"two-hosts-{rate}.json"), one)
            rows.append(("2 hosts x 1 rank", rate, remote))
    print(f"# mpibench train {' '.join(options)}; results in {folder}")
    print("| placement | link | step ms | compute ms | exposed | hidden | tokens/s | "
          "efficiency vs 1 rank |")
    print("|---|---|---|---|---|---|---|---|")
    for place, rate, t in rows:
        s, sc = t["summary"], t["scaling"]
        print(f"| {place} | {rate} | {s['step_s'] * 1e3:.0f} | {s['compute_s'] * 1e3:.0f} | "
              f"{s['exposed_share'] * 100:.0f}% | {s['hidden_share'] * 100:.0f}% | "
              f"{s['tokens_per_s']:.0f} | {sc['efficiency']:.2f} |")


if __name__ == "__main__":
    main()

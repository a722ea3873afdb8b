"""What reading a host's paths costs at start-up: diagnose/pathlimits.collect(), which `run`,
`check` and `doctor` call once per host (on its first rank), timed on this host and on a
fabricated 8-GPU host (launch/fakesysfs.py: PCIe links, NVLink status, 4 RDMA NICs).

    python bench/path_facts.py [--rounds 50] [--quick]

--quick (seconds, for CI): 5 rounds. Prints the median and the slowest round in ms. On a GPU
host nvidia-smi's own start (two calls: the GPU query and `nvidia-smi nvlink -s`) comes on top
of this host's figure; where nvidia-smi is missing, as here, it is a failed PATH look-up.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), os.path.join(os.path.dirname(HERE), "launch")]

import fakesysfs  # noqa: E402
from mpibench.diagnose import pathlimits  # noqa: E402


def timed(rounds, root, fake):
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        pathlimits.collect(root, fake)
        out.append(time.perf_counter() - start)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--quick", action="store_true", help="5 rounds (CI)")
    a = p.parse_args()
    rounds = 5 if a.quick else a.rounds
    with tempfile.TemporaryDirectory() as tmp:
        tree = fakesysfs.build(os.path.join(tmp, "host"), downtrained={2: 8})
        cases = [("this host", timed(rounds, "/", None)),
                 ("fabricated 8 x H100, 4 NICs", timed(rounds, tree, tree))]
    print(f"# pathlimits.collect(), {rounds} rounds each (ms)")
    print(f"{'host':<30s} {'median ms':>10s} {'max ms':>10s}")
    for name, t in cases:
        print(f"{name:<30s} {statistics.median(t) * 1e3:10.2f} {max(t) * 1e3:10.2f}")


if __name__ == "__main__":
    main()

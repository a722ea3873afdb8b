"""verify's figures on two namespace hosts (launch/fakecluster.py) with tc-limited links:
gloo's all_reduce busbw over iperf3's TCP rate, mpibench's MPI sendrecv over NetPIPE's,
and the two timers, through launch/verify.sh (root; iperf3 and netpipe-openmpi installed).

    python bench/verify_hosts.py [--rate 1gbit] [--rounds 5] [-n 20] [--sizes 1M,4M,16M]
                                 [-b 4M] [-e 16M] [--repeat 1] [--same-mpi] [--quick]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "launch"))
from fakecluster import FakeCluster  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--rounds", default="5")
    ap.add_argument("-n", default="20")
    ap.add_argument("-w", default="5")
    ap.add_argument("--sizes", default="1M,4M,16M")
    ap.add_argument("-b", default="4M")
    ap.add_argument("-e", default="16M")
    ap.add_argument("--repeat", type=int, default=1, help="whole runs, each on fresh hosts")
    ap.add_argument("--same-mpi", action="store_true", help="mpibench under NetPIPE's MPI too")
    ap.add_argument("--quick", action="store_true", help="one 1 MiB size, 2 short rounds (CI)")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.n, a.w, a.sizes, a.b, a.e = "2", "3", "1", "1M", "1M", "1M"
    py = os.path.join(HERE, "..", ".venv", "bin", "python")
    env = dict(os.environ, OMP_NUM_THREADS="1", MPIBENCH_PYTHON=os.path.abspath(py))
    for k in range(a.repeat):
        with tempfile.TemporaryDirectory() as tmp, FakeCluster(hosts=2, rates=a.rate) as c:
            out = os.path.join(tmp, "out")
            done = c.run_on("h1", [os.path.join(HERE, "..", "launch", "verify.sh"),
                                   "--host", "h1,h2", "--ppn", "1", "--mca", "plm_rsh_agent",
                                   str(c.agent), "--out", out,
                                   *(["--same-mpi"] if a.same_mpi else []), "-b", a.b, "-e", a.e, "-n", a.n,
                                   "-w", a.w, "--", "--sizes", a.sizes, "--rounds", a.rounds,
                                   "--iperf-seconds", "5"], env=env, timeout=1200)
            c._kill_strays()
            print(f"# run {k + 1} of {a.repeat}: verify.sh exit {done.returncode}, link {a.rate}"
                  + (", mpibench under NetPIPE's MPI" if a.same_mpi else ""))
            path = os.path.join(out, "verify.json")
            if not os.path.exists(path):
                print(done.stdout[-3000:], done.stderr[-3000:])
                continue
            v = json.load(open(path))["verify"]
            print(f"# {v['rounds']} rounds, {v['iters']} iterations after {v['warmup']} warm-up")
            for ch in v["checks"]:
                ratio = "" if ch["ratio"] is None else f"{ch['ratio']:.3f}"
                print(f"{ch['check']:<40s} {ch['figure']:<45s} {ch['reference']:<40s} "
                      f"{ratio:>7s} {ch['verdict']}")


if __name__ == "__main__":
    main()

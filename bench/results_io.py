"""What writing the results file costs rank 0: bytes and time for a long -I 1 document.

    python bench/results_io.py [--rows 1000] [--np 8] [--rounds 1] [--tree PATH] [--quick]

--quick (seconds, for CI): 100 rows on 2 ranks, one round.

Runs `mpibench run --collectives all_reduce -b 8 -i 8 -e ROWS*8 -n 2 -w 0 -I 1 -c 0` under
mpirun twice per round, without and with --json; rank 0 reads its own /proc/self/io and
CPU time as it exits. What the results file costs is the difference: wchar (bytes handed
to write(), the file's and nothing else's, as stdout and the ranks' traffic are the same
in both runs), write_bytes (bytes the kernel sent towards the disk), rank 0's CPU time and
the job's wall time; and, in the run with --json, the time rank 0 spent inside the results
file's write() (wall and thread CPU time), which the machine's load disturbs least. --tree
runs another checkout's mpibench (e.g. an older commit) with this script.
"""
import argparse
import atexit
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WHOLE = ("wchar", "write_bytes", "cpu_s", "wall_s")      # the process's: with - without --json


def rank_job(report, argv):
    """Inside mpirun: run mpibench, and on rank 0 leave its I/O and CPU figures in REPORT,
    and the time spent in the results file's write() (this version's or an older one's)."""
    from mpibench import cli
    from mpibench.results import files
    spent = {"writer_s": 0.0, "writer_cpu_s": 0.0, "writes": 0}
    write = files.ResultFile.write

    def timed(self, doc):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return write(self, doc)
        finally:
            spent["writer_s"] += time.perf_counter() - t0
            spent["writer_cpu_s"] += time.thread_time() - c0
            spent["writes"] += 1
    files.ResultFile.write = timed

    def leave():
        if os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
            return
        with open("/proc/self/io") as f:
            io = dict(line.split(": ") for line in f.read().splitlines())
        use = resource.getrusage(resource.RUSAGE_SELF)
        with open(report, "w") as f:
            json.dump({"wchar": int(io["wchar"]), "write_bytes": int(io["write_bytes"]),
                       "cpu_s": use.ru_utime + use.ru_stime, **spent}, f)
    atexit.register(leave)
    cli.main(argv)


def one(tree, np_, rows, json_path):
    args = ["run", "--collectives", "all_reduce", "-b", "8", "-i", "8", "-e", str(8 * rows),
            "-n", "2", "-w", "0", "-I", "1", "-c", "0", "--probe-iters", "0"]
    if json_path:
        args += ["--json", json_path]
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "rank0.json")
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        mpirun = os.path.join(sys.prefix, "bin", "mpirun")
        cmd = [mpirun if os.path.exists(mpirun) else "mpirun", *root, "--oversubscribe", "-np", str(np_),
               sys.executable, os.path.abspath(__file__), "--rank-job", report, "--", *args]
        env = dict(os.environ, PYTHONPATH=tree)
        t0 = time.monotonic()
        done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if done.returncode != 0:
            sys.exit(f"mpirun failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        with open(report) as f:
            figures = json.load(f)
    figures["wall_s"] = wall
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--np", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tree", default=os.path.dirname(HERE),
                    help="the checkout whose mpibench runs (default: this one)")
    ap.add_argument("--quick", action="store_true", help="100 rows on 2 ranks, one round")
    ap.add_argument("--rank-job", metavar="REPORT", help=argparse.SUPPRESS)
    a, rest = ap.parse_known_args()
    if a.rank_job:
        sys.path.insert(0, os.getcwd())
        return rank_job(a.rank_job, [x for x in rest if x != "--"])
    if a.quick:
        a.rows, a.np, a.rounds = 100, 2, 1
    tree = os.path.abspath(a.tree)
    deltas, writer = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(a.rounds):
            path = os.path.join(tmp, f"r{k}.json")
            bare, written = one(tree, a.np, a.rows, None), one(tree, a.np, a.rows, path)
            with open(path) as f:
                doc = json.load(f)
            assert len(doc["results"]) == a.rows, len(doc["results"])
            deltas.append({"file": os.path.getsize(path),
                           **{k: written[k] - bare[k] for k in WHOLE}, "wall_s_bare": bare["wall_s"]})
            writer.append(written)
    med = {k: statistics.median(d[k] for d in deltas) for k in deltas[0]}
    written_med = {k: statistics.median(w[k] for w in writer) for k in writer[0]}
    print(f"# {a.rows} rows, -I 1, {a.np} ranks, {a.rounds} round(s), tree {tree}; medians of "
          f"(run with --json) - (same run without)")
    print(f"{'rows':>6} {'ranks':>5} {'file MB':>8} {'written MB':>11} {'write_bytes MB':>15} "
          f"{'x file':>7} {'writes':>6} {'writer s':>9} {'writer CPU s':>13} {'rank0 CPU s':>12} "
          f"{'wall s':>7} {'wall s bare':>12}")
    mb = 1e6
    print(f"{a.rows:>6} {a.np:>5} {med['file'] / mb:>8.2f} {med['wchar'] / mb:>11.2f} "
          f"{med['write_bytes'] / mb:>15.2f} {med['wchar'] / med['file']:>7.1f} "
          f"{written_med['writes']:>6.0f} {written_med['writer_s']:>9.2f} "
          f"{written_med['writer_cpu_s']:>13.2f} {med['cpu_s']:>12.2f} {med['wall_s']:>7.1f} "
          f"{med['wall_s_bare']:>12.1f}")


if __name__ == "__main__":
    main()

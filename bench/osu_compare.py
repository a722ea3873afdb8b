"""mpibench's MPI backend against OSU's C osu_allreduce and a bare mpi4py loop.

    .venv/bin/python bench/osu_compare.py [PATH/TO/osu_allreduce] [--rounds 3] [--iters 1000] [--quick]

Without the OSU binary its columns say n/a (mpibench against the bare loop only).
--quick (seconds, for CI): one round, 50 iterations after 5 warm-ups, 8 B to 1 KiB.

Two ranks on this machine, float32 sums from 8 B to 1 MiB (--max), with the same Open
MPI (the venv's mpirun, which the osu_allreduce binary must have been built against with
the venv's mpicc; build it outside this repository). Three programs, each in its own
mpirun, interleaved for --rounds rounds; per size the best (lowest) time of the rounds:

  OSU       osu_allreduce (out of place, MPI_FLOAT, a barrier between calls)
  mpibench  mpibench run --backend mpi --collectives all_reduce -c 0 (both modes)
  bare      comm.Allreduce(MPI.IN_PLACE, buf) in a perf_counter loop, on a numpy view of a
            torch CPU buffer as mpibench's, with MPI started as mpibench starts it

Targets (printed, not asserted): mpibench out-of-place within 10% of OSU at 64 KiB and
above; mpibench in-place at most 0.5 us per call over the bare loop at every size.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv", "bin")
MPIRUN = [os.path.join(VENV, "mpirun"), "--oversubscribe", "-np", "2"] + (
    ["--allow-run-as-root"] if os.geteuid() == 0 else [])
PYTHON = os.path.join(VENV, "python")


def sizes(maxbytes):
    out, s = [], 8
    while s <= maxbytes:
        out.append(s)
        s *= 2
    return out


def run(cmd, timeout=600):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return done.stdout


def osu(binary, maxbytes, iters, warmup):
    text = run(MPIRUN + [binary, "-m", f"8:{maxbytes}", "-i", str(iters), "-x", str(warmup)])
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            out[int(parts[0])] = float(parts[1])
    return out


def mpibench(maxbytes, iters, warmup):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        run(MPIRUN + [PYTHON, "-m", "mpibench", "run", "--backend", "mpi", "--collectives",
                      "all_reduce", "-b", "8", "-e", str(maxbytes), "-n", str(iters), "-w",
                      str(warmup), "-c", "0", "--probe-iters", "0", "--json", path])
        with open(path) as f:
            doc = json.load(f)
    return ({r["size"]: r["out_of_place"]["time_us"] for r in doc["results"]},
            {r["size"]: r["in_place"]["time_us"] for r in doc["results"]})


def bare(maxbytes, iters, warmup):
    text = run(MPIRUN + [PYTHON, os.path.abspath(__file__), "--bare-worker", str(maxbytes),
                         str(iters), str(warmup)])
    pairs = {int(k): v for k, v in json.loads(text.strip().splitlines()[-1]).items()}
    return {k: v[0] for k, v in pairs.items()}, {k: v[1] for k, v in pairs.items()}


def bare_worker(maxbytes, iters, warmup, reps=5):
    """One rank: per size, the bare loop and mpibench's own timed path (the engine's views,
    the MPI backend's bound calls and time_loop) on the same buffer, alternated reps times;
    the best of each. Prints {size: [bare_us, harness_us]} on rank 0."""
    sys.path.insert(0, ROOT)
    from types import SimpleNamespace
    from mpibench.launch.comm import MPIComm
    from mpibench.measure.backends.mpi import MPIBackend
    from mpibench.measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
    from mpibench.measure.collectives.base import Ctx
    from mpibench.measure.dtypes import DTYPES
    from mpibench.measure.engine import iteration_views
    comm = MPIComm()                       # MPI started exactly as mpibench starts it
    MPI, world = comm.MPI, comm.world
    backend = MPIBackend(SimpleNamespace(comm=comm, launcher="openmpi", rank=comm.rank))
    dt = DTYPES["float32"]
    buf = backend.typed(backend.alloc(maxbytes), dt)
    perf = time.perf_counter
    result = {}
    for size in sizes(maxbytes):
        c = ALL_REDUCE.counts(size // dt.size, dt.size, world.size)
        ctx = Ctx(rank=world.rank, n=world.size, root=-1, op="sum", dtype=dt, count=c.param,
                  in_place=True, backend_op=MPI.SUM)
        views = iteration_views(buf, buf, c, "in", world.rank, iters)
        bound = [backend.bind(ALL_REDUCE, sv, rv, ctx, False) for sv, rv in views]
        calls = [bound[i % len(bound)] for i in range(iters)]
        view = buf[:c.param].numpy()
        best_bare = best_harness = float("inf")
        for _ in range(reps):
            for _ in range(warmup):
                world.Allreduce(MPI.IN_PLACE, view)
            world.Barrier()
            t0 = perf()
            for _ in range(iters):
                world.Allreduce(MPI.IN_PLACE, view)
            t1 = perf()
            world.Barrier()
            harness, _ = backend.time_loop(calls)
            best_bare = min(best_bare, (t1 - t0) / iters)
            best_harness = min(best_harness, harness)
        per_rank = world.gather((best_bare, best_harness), root=0)
        if world.rank == 0:
            result[size] = [sum(x[0] for x in per_rank) / len(per_rank) * 1e6,
                            sum(x[1] for x in per_rank) / len(per_rank) * 1e6]
    if world.rank == 0:
        print(json.dumps(result))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--bare-worker":
        return bare_worker(*map(int, sys.argv[2:5]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("osu_allreduce", nargs="?", help="path of the built osu_allreduce binary "
                                                     "(without it: OSU columns n/a)")
    ap.add_argument("--quick", action="store_true",
                    help="seconds, not minutes: 1 round, 50 iterations, up to 1 KiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--max", type=int, default=1 << 20, help="largest size in bytes (default 1 MiB)")
    a = ap.parse_args()
    if a.quick:
        a.rounds, a.iters, a.warmup, a.max = 1, 50, 5, 1024
    best = {"osu": {}, "out": {}, "in": {}, "bare": {}, "harness": {}}

    def keep(name, figures):
        for size, us in figures.items():
            best[name][size] = min(us, best[name].get(size, float("inf")))

    for k in range(a.rounds):
        if a.osu_allreduce:
            keep("osu", osu(a.osu_allreduce, a.max, a.iters, a.warmup))
        out_t, in_t = mpibench(a.max, a.iters, a.warmup)
        keep("out", out_t)
        keep("in", in_t)
        bare_t, harness_t = bare(a.max, a.iters, a.warmup)
        keep("bare", bare_t)
        keep("harness", harness_t)
        print(f"# round {k + 1} of {a.rounds} done", file=sys.stderr, flush=True)

    print(f"# all_reduce float32 sum, 2 ranks, {a.iters} iterations after {a.warmup} warm-ups, "
          f"best of {a.rounds} rounds; times in us per call")
    head = ("size", "OSU", "mpibench out", "vs OSU", "<=10%?", "mpibench in",
            "bare in", "harness in", "over bare", "<=0.5us?")
    print("%8s %9s %12s %8s %7s %11s %9s %10s %9s %9s" % head)
    for size in sizes(a.max):
        o, m_out, m_in, b, h = (best[n].get(size) for n in ("osu", "out", "in", "bare", "harness"))
        vs = (m_out / o - 1) * 100 if o and m_out else None
        over = h - b if b is not None and h is not None else None
        print("%8d %9s %12s %8s %7s %11s %9s %10s %9s %9s" % (
            size, _f(o), _f(m_out), "n/a" if vs is None else f"{vs:+.1f}%",
            "-" if size < 65536 or vs is None else ("ok" if vs <= 10 else "MISS"),
            _f(m_in), _f(b), _f(h), "n/a" if over is None else f"{over:+.2f}",
            "n/a" if over is None else ("ok" if over <= 0.5 else "MISS")))
    print("# OSU: C, out of place, a barrier between calls. mpibench out/in: the CLI "
          "(mpibench run --backend mpi), its own mpirun. bare in / harness in: one process, the "
          "same buffer, alternated 5 times per size and round: a bare comm.Allreduce loop and "
          "mpibench's timed path (engine views, bound calls, time_loop); 'over bare' = harness - bare.")


def _f(value):
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()

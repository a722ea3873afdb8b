"""What mpibench adds over a bare torch.distributed loop: time per call, and memory.

    mpirun -np 2 python bench/overhead.py [--rounds 7] [--seconds 0.2] [--quick]
    python bench/overhead.py --memory [--np 2] [--size 1G] [--quick]

--quick (seconds, for CI): two sizes, two rounds, 0.02 s per measurement; --memory at 1M.

Time: in one job, for each size, mpibench's own timed path (Engine._measure: the
collective module's bound calls timed by TorchBackend.time_loop, after the same warm-up
and barrier) and a hand-written `for _ in range(n): dist.all_reduce(t)` loop timed with
perf_counter, on the same buffers. The two alternate (order swapped each round) over
several rounds so that the machine's noise falls on both alike; each round's time is the
mean over ranks (as -a 1); the table shows the medians over rounds.

Memory: runs `mpibench run --collectives C -b SIZE -e SIZE -n 2 -w 1 -c 0` under mpirun
for all_reduce and all_gather, and prints each rank's peak resident memory (the JSON's
'memory' records, read from VmHWM at the end of the run) beside the buffers the run should
take (send + receive bytes from engine.footprint), the same run at 8 bytes (the harness
with no buffers to speak of), an idle process that imported torch, and one bare
torch.distributed call of the same collective on buffers of the same size (what the
library itself holds: gloo's all_gather keeps a temporary copy of its whole output).
"""
import argparse
import json
from dataclasses import replace
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tabulate import tabulate  # noqa: E402

from mpibench.measure.sizes import format_size, parse_size  # noqa: E402

SIZES = "8,64,1K,16K,256K,1M,4M,16M,64M"
COLLECTIVES = ("all_reduce", "all_gather")


# ---------------- time per call ----------------

def bare_all_reduce(dist, perf, t, n):
    t0 = perf()
    for _ in range(n):
        dist.all_reduce(t)
    return (perf() - t0) / n


def bare_all_gather(dist, perf, out, inp, n):
    # all_gather_single where torch has it (all_gather_into_tensor is deprecated there)
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    t0 = perf()
    for _ in range(n):
        all_gather(out, inp)
    return (perf() - t0) / n


class Case:
    """One collective at one size: its buffers, the engine's path and the bare loop."""

    def __init__(self, session, backend, name, size):
        from mpibench.measure.collectives import REGISTRY
        from mpibench.measure.collectives.base import Ctx
        from mpibench.measure.dtypes import DTYPES
        from mpibench.measure.engine import Buffers, Engine, Plan, footprint, iteration_views
        self.s, self.b = session, backend
        self.coll = REGISTRY[name]
        self.dt = DTYPES["float32"]
        self.mode = "in" if name == "all_reduce" else "out"
        self.plan = Plan(collectives=[self.coll], sizes=[size], dtypes=[self.dt], ops=["sum"],
                         check=0, blocking=2, modes=(self.mode,))
        send, recv = footprint(self.plan, session.size, [size], backend.modes)
        self.bufs = Buffers(backend, send, recv)   # exactly one row: one view
        self.send_t = backend.typed(self.bufs.send, self.dt) if self.bufs.send is not None else None
        self.recv_t = backend.typed(self.bufs.recv, self.dt)
        self.c = self.coll.counts(size // self.dt.size, self.dt.size, session.size)
        self.ctx = Ctx(rank=session.rank, n=session.size, root=-1,
                       op="sum" if self.coll.reduces else "none", dtype=self.dt,
                       count=self.c.param, in_place=self.mode == "in",
                       backend_op=backend.ops["sum"], device=backend.device)
        self.engine = Engine(session, backend, self.plan, None)
        # the bare loop works on the very views the engine times
        sv, rv = iteration_views(self.send_t, self.recv_t, self.c, self.mode, session.rank, 1)[0]
        dist, perf = backend.dist, time.perf_counter
        if name == "all_reduce":
            self._bare = lambda n: bare_all_reduce(dist, perf, rv, n)
        else:
            self._bare = lambda n: bare_all_gather(dist, perf, rv, sv, n)

    def mpibench(self, iters, warmup):
        self.engine.plan = replace(self.plan, iters=iters, warmup=warmup)     # the row's -n and -w
        seconds, _, _, _ = self.engine.measure(self.coll, self.send_t, self.recv_t, self.c,
                                             self.mode, self.ctx, 0)
        return seconds

    def bare(self, iters, warmup):
        if warmup:
            self._bare(warmup)
        self.s.comm.barrier()
        return self._bare(iters)


def _load():
    """The 1-minute load average: other work on the machine shows in every figure."""
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def overhead(args):
    from mpibench.launch import bootstrap, launcher
    from mpibench.measure.backends.torchdist import TorchBackend
    session = bootstrap.start(launcher.detect(os.environ), backend="gloo")
    backend = TorchBackend(session)
    sizes = [parse_size(x) for x in args.sizes.split(",")]
    load0 = _load()
    rows = []
    session.out(f"# {session.size} ranks, gloo, float32, {args.rounds} rounds per size, "
                f"about {args.seconds} s per measurement; times are per call, mean over ranks, "
                f"median over rounds")
    for name in COLLECTIVES:
        for size in sizes:
            from mpibench.measure.collectives import REGISTRY
            if REGISTRY[name].counts(size // 4, 4, session.size).param == 0:
                session.out(f"# {name} {format_size(size)}: skipped, less than one aligned "
                            f"float32 per rank (as the engine skips it)")
                continue
            case = Case(session, backend, name, size)
            # iterations for about args.seconds per measurement, the same on every rank
            probe = session.comm.allgather(case.bare(3, 1))
            iters = session.comm.bcast(max(3, min(20000, int(args.seconds / max(probe)))), root=0)
            warm = max(1, iters // 10)
            bare, mine = [], []
            for k in range(args.rounds):
                order = (case.bare, case.mpibench) if k % 2 == 0 else (case.mpibench, case.bare)
                for fn in order:
                    t = statistics.mean(session.comm.allgather(fn(iters, warm)))
                    (bare if fn == case.bare else mine).append(t)
            b, m = statistics.median(bare), statistics.median(mine)
            paired = statistics.median(y / x for x, y in zip(bare, mine))
            rows.append([name, format_size(size), iters, f"{b * 1e6:.2f}", f"{m * 1e6:.2f}",
                         f"{m / b:.3f}", f"{paired:.3f}", f"{(m - b) * 1e6:+.2f}",
                         f"{min(mine) / min(bare):.3f}"])
            session.out(tabulate([rows[-1]], tablefmt="plain"))
            del case
    session.out("")
    session.out(tabulate(rows, headers=["collective", "size", "iters", "bare us/call",
                                        "mpibench us/call", "ratio", "paired ratio",
                                        "added us/call", "ratio of minima"],
                         colalign=("left",) + ("right",) * 8))
    session.out(f"# load average before / after: {load0} / {_load()} on {os.cpu_count()} cores")
    session.close()


# ---------------- memory ----------------

def _mpirun():
    here = os.path.join(sys.prefix, "bin", "mpirun")
    return here if os.path.exists(here) else "mpirun"


def _run_json(np, argv, folder, tag):
    out = os.path.join(folder, f"{tag}.json")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    cmd = ([_mpirun()] + root + ["--oversubscribe", "-np", str(np), sys.executable, "-m",
           "mpibench"] + argv + ["--json", out])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    with open(out) as f:
        return json.load(f)


def bare_peak(args):
    """Under mpirun: one bare torch.distributed call on buffers of the run's footprint;
    rank 0 prints every rank's peak RSS (JSON). Says what the library itself holds."""
    from mpibench.diagnose.rankfacts import peak_rss_bytes
    from mpibench.launch import bootstrap, launcher
    session = bootstrap.start(launcher.detect(os.environ), backend="gloo")
    import torch
    import torch.distributed as dist
    size = parse_size(args.size)
    out = torch.zeros(size, dtype=torch.uint8)
    if args.bare_peak == "all_reduce":
        dist.all_reduce(out)
    else:
        inp = torch.zeros(size // session.size, dtype=torch.uint8)
        bare_all_gather(dist, time.perf_counter, out, inp, 1)
    peaks = session.comm.gather(peak_rss_bytes(), root=0)
    session.out(json.dumps(peaks))
    session.close()


def _bare_peaks(np, name, size):
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    cmd = ([_mpirun()] + root + ["--oversubscribe", "-np", str(np), sys.executable,
           os.path.abspath(__file__), "--bare-peak", name, "--size", str(size)])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def idle_torch_rss():
    code = ("import torch, torch.distributed\n"
            "from mpibench.diagnose.rankfacts import peak_rss_bytes\nprint(peak_rss_bytes())")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=120).stdout)


def memory(args):
    from mpibench.measure.collectives import REGISTRY
    from mpibench.measure.dtypes import DTYPES
    from mpibench.measure.engine import Plan, footprint
    size = parse_size(args.size)
    idle = idle_torch_rss()
    mib = 1 << 20
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in COLLECTIVES:
            common = ["--collectives", name, "-n", "2", "-w", "1", "-c", "0"]
            big = _run_json(args.np, common + ["-b", str(size), "-e", str(size)], folder, name)
            small = _run_json(args.np, common + ["-b", "8", "-e", "8"], folder, name + "-8")
            plan = Plan(collectives=[REGISTRY[name]], sizes=[size], dtypes=[DTYPES["float32"]],
                        ops=["sum"])
            send, recv = footprint(plan, args.np, [size])
            bare = _bare_peaks(args.np, name, size)
            for m, m8, b in zip(big["memory"], small["memory"], bare):
                extra = m["peak_rss_bytes"] - (send + recv) - m8["peak_rss_bytes"]
                rows.append([name, m["rank"], f"{m['peak_rss_bytes'] / mib:.0f}",
                             f"{(send + recv) / mib:.0f}", f"{m['buffer_bytes'] / mib:.0f}",
                             f"{m8['peak_rss_bytes'] / mib:.0f}", f"{idle / mib:.0f}",
                             f"{extra / mib:+.0f}", f"{b / mib:.0f}"])
    print(f"# mpibench run at {format_size(size)}, {args.np} ranks (gloo); MiB")
    print(tabulate(rows, headers=["collective", "rank", "peak RSS", "footprint send+recv",
                                  "allocated", "same run at 8 B", "idle torch process",
                                  "peak - footprint - 8 B run",
                                  "bare torch call, same buffers"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memory", action="store_true", help="peak RSS per rank at --size instead")
    p.add_argument("--sizes", default=SIZES, help=f"time mode sizes (default {SIZES})")
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds per size (default 7)")
    p.add_argument("--seconds", type=float, default=0.2,
                   help="target seconds per measurement (default 0.2)")
    p.add_argument("--np", type=int, default=2, help="memory mode: ranks (default 2)")
    p.add_argument("--size", default="1G", help="memory mode: the size (default 1G)")
    p.add_argument("--bare-peak", choices=COLLECTIVES, help=argparse.SUPPRESS)
    p.add_argument("--quick", action="store_true",
                   help="seconds, not minutes: sizes 8,64K, 2 rounds, 0.02 s; --memory at 1M")
    args = p.parse_args()
    if args.quick:
        args.sizes, args.rounds, args.seconds, args.size = "8,64K", 2, 0.02, "1M"
    if args.bare_peak:
        bare_peak(args)
    elif args.memory:
        memory(args)
    else:
        overhead(args)


if __name__ == "__main__":
    main()

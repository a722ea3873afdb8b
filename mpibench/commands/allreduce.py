"""mpibench allreduce: the classic single-payload all_reduce bandwidth test, per rank."""
from functools import partial
from statistics import mean

from tabulate import tabulate

from ..errors import UsageError
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.base import algbw, busbw as bus
from ..measure.sizes import format_size
from ..results import rows, trials
from ..results.numbers import figure
from .common import classic, options

HELP = "the classic all_reduce bandwidth test: one big payload, per-trial and per-rank algbw/busbw"
DESCRIPTION = (
    "One all_reduce of a single large payload (default 4 GiB on GPUs, 64 MiB on CPUs), warmed "
    "up, then timed in trials (each after a barrier, synchronized): per-trial algbw and busbw, "
    "then mean, min and max in GBps and Gbps, every rank's mean and the slowest rank by name.")
SESSION = "args"

GPU_PAYLOAD = 4 << 30
CPU_PAYLOAD = 64 << 20


def add_arguments(p):
    p.add_argument("-b", "--size", dest="payload", type=options.size_arg, default=None,
                   metavar="SIZE", help="bytes per all_reduce (default 4G on GPUs, 64M on CPUs)")
    p.add_argument("-n", "--iters", dest="trials", type=options.int_at_least(1), default=5,
                   metavar="N", help="timed calls, each after a barrier (default 5)")
    p.add_argument("-w", "--warmup", type=options.int_at_least(0), default=2, metavar="N",
                   help="untimed calls first (default 2)")
    classic.add_common(p)


def execute(session, args):
    dt = classic.one_dtype(args.dtype)
    backend, out, records = classic.begin(session, args, "allreduce", "bandwidth of one all_reduce", {})
    classic.check_supported(backend, ALL_REDUCE, dt)
    payload = args.payload or (GPU_PAYLOAD if backend.cuda else CPU_PAYLOAD)
    count = payload // dt.size
    if count < 1:
        raise UsageError(f"--payload {payload} is less than one {dt.name} element")
    gathered = _measure(session, backend, dt, count, args)
    if session.rank != 0:
        return 0
    n = session.size
    factor = ALL_REDUCE.busbw_factor(n)
    busbw = partial(bus, factor=factor)
    nbytes = count * dt.size
    out.set(config={**out.doc["config"], "payload": nbytes, "count": count, "dtype": dt.name,
                    "trials": args.trials, "warmup": args.warmup, "busbw_factor": factor})
    out.say(f"# {format_size(nbytes)} ({nbytes} bytes, {count} x {dt.name}) all_reduce on {n} "
            f"rank{'s' if n != 1 else ''}, {args.warmup} warm-up, {args.trials} trials, "
            f"busbw = algbw x {factor:g} (2(n-1)/n)"
            + ("; with one rank busbw is not defined" if factor == 0 else ""))
    stats = _trials(out, backend, dt, count, n, gathered, args.trials, busbw)
    means = [mean(g) for g in gathered]
    slow = _per_rank(out, records, means, nbytes, busbw)
    out.set(summary={"algbw_GBps": stats, "busbw_GBps": {k: busbw(v) for k, v in stats.items()},
                     "per_rank_mean_time_us": [t * 1e6 for t in means],
                     "slowest_rank": {"rank": slow, "host": records[slow]["hostname"],
                                      "local_rank": records[slow]["local_rank"],
                                      "mean_time_us": means[slow] * 1e6}})
    out.finish()
    return 0


def _measure(session, backend, dt, count, args):
    """Every rank: warm-up, then the timed trials, each after a barrier; rank 0 gets every
    rank's times."""
    buf = classic.tensor(session, backend, dt, count)
    call = backend.bind(ALL_REDUCE, buf, buf, classic.ctx(session, backend, dt, count), False)
    session.watch.arm("allreduce: warm-up")
    backend.time_each(call, args.warmup, session.comm.barrier)
    session.watch.arm("allreduce: timed trials")
    times = backend.time_each(call, args.trials, session.comm.barrier)
    session.watch.arm("allreduce: gathering the times")
    gathered = session.comm.gather(times, root=0)
    session.watch.disarm()
    return gathered


def _trials(out, backend, dt, count, n, gathered, ntrials, busbw):
    """Rank 0: a line per trial and the document's one row of them; the algbw's mean, min
    and max over the trials, printed and returned."""
    # One row of the document, in place: the median of the trials and their spread, as
    # run --trials writes it (every trial kept under the row's "trials").
    out.trials = trials.Collector()
    out.set(trials=ntrials)
    c = ALL_REDUCE.counts(count, dt.size, n)
    trial_bw = []
    for k in range(ntrials):
        # nccl-tests' -a 1: the mean time over ranks, and algbw = size / that time
        row = rows.of_collective(ALL_REDUCE, backend.name, dt, c, n, "sum", -1, "in_place",
                                 [g[k] for g in gathered])
        t = row["in_place"]["time_us"] / 1e6
        alg = row["in_place"]["algbw_GBps"]
        trial_bw.append(alg)
        out.add_row(row, f"trial {k + 1}: time {classic.ms(t)} ms  "
                         f"algbw {classic.bw_cells(alg)}  busbw {classic.bw_cells(busbw(alg))}")
    good = [bw for bw in trial_bw if bw is not None]
    stats = {name: fn(good) if good else None for name, fn in (("mean", mean), ("min", min), ("max", max))}
    out.say("")
    out.say(tabulate([[name, figure(v), figure(v and v * 8), figure(busbw(v)), figure(busbw(v) and busbw(v) * 8)]
                      for name, v in stats.items()],
                     headers=["over trials", "algbw GBps", "algbw Gbps", "busbw GBps", "busbw Gbps"],
                     disable_numparse=True))
    return stats


def _per_rank(out, records, means, nbytes, busbw):
    """Rank 0: every rank's mean time and bandwidths, and the slowest rank (returned)."""
    labels = classic.labels(records)
    out.say("")
    out.say(tabulate([[r, labels[r], classic.ms(t), figure(algbw(nbytes, t)),
                       figure(busbw(algbw(nbytes, t)))] for r, t in enumerate(means)],
                     headers=["rank", "host:local_rank", "mean ms", "algbw GBps", "busbw GBps"],
                     disable_numparse=True))
    slow = max(range(len(means)), key=lambda r: means[r])
    fast = min(means)
    out.say(f"\nslowest rank: {slow} on host {records[slow]['hostname']} (local rank "
            f"{records[slow]['local_rank']}): mean {classic.ms(means[slow])} ms, "
            f"{means[slow] / fast:.2f}x the fastest rank" if fast > 0 else "")
    return slow

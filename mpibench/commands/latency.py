"""mpibench latency: one all_reduce of S bytes against K all_reduces of S/K bytes each."""
from statistics import mean

from tabulate import tabulate

from ..errors import UsageError
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.base import algbw, busbw
from ..measure.sizes import format_size
from ..results import rows
from ..results.numbers import figure
from .common import classic, options

HELP = "1 x S against K x S/K all_reduces of the same total bytes, per rank"
DESCRIPTION = (
    "The latency comparison: one all_reduce of S bytes, then K all_reduces of S/K bytes each "
    "(the same total), on every rank; each rank's duration, algbw and busbw of both, shown as "
    "host:local_rank, and the ratio of the two durations. Defaults: S = 4 GiB and K = 1000 on "
    "GPUs, S = 64 MiB and K = 1000 on CPUs.")
SESSION = "args"

GPU_SIZE = 4 << 30
CPU_SIZE = 64 << 20


def add_arguments(p):
    p.add_argument("-b", "--size", type=options.size_arg, default=None, metavar="S",
                   help="total bytes (default 4G on GPUs, 64M on CPUs)")
    p.add_argument("-k", "--count", type=options.int_at_least(1), default=1000, metavar="K",
                   help="number of small all_reduces, each of S/K bytes (default 1000)")
    p.add_argument("-w", "--warmup", type=options.int_at_least(0), default=2, metavar="N",
                   help="untimed calls of each size first (default 2)")
    classic.add_common(p)


def execute(session, args):
    dt = classic.one_dtype(args.dtype)
    backend, out, records = classic.begin(session, args, "latency",
                                          "one big all_reduce against many small ones", {})
    classic.check_supported(backend, ALL_REDUCE, dt)
    size = args.size or (GPU_SIZE if backend.cuda else CPU_SIZE)
    count = size // dt.size
    small = count // args.count
    if small < 1:
        raise UsageError(f"-k {args.count} is larger than S in elements ({format_size(size)} "
                         f"is {count} {dt.name} elements)")
    blocking = backend.default_blocking()
    gathered = _measure(session, backend, dt, count, small, blocking, args)
    if session.rank != 0:
        return 0
    _report(session, out, backend, dt, count, small, blocking, records, gathered, args)
    out.finish()
    return 0


def _measure(session, backend, dt, count, small, blocking, args):
    """Every rank times one call of count elements, then args.count calls of small
    elements; rank 0 gets each rank's (one, many) in seconds."""
    buf = classic.tensor(session, backend, dt, count)
    part = buf[:small]
    big = backend.bind(ALL_REDUCE, buf, buf, classic.ctx(session, backend, dt, count), False)
    little = backend.bind(ALL_REDUCE, part, part, classic.ctx(session, backend, dt, small), False)
    calls = [little] * args.count
    session.watch.arm("latency: warm-up")
    if args.warmup:
        backend.time_loop([big] * args.warmup)
        backend.time_loop([little] * args.warmup, blocking)
    session.watch.arm("latency: the big call")
    session.comm.barrier()
    one = backend.time_loop([big])
    session.watch.arm("latency: the small calls")
    session.comm.barrier()
    many = backend.time_loop(calls, blocking) * args.count
    session.watch.arm("latency: gathering the times")
    gathered = session.comm.gather((one, many), root=0)
    session.watch.disarm()
    return gathered


def _report(session, out, backend, dt, count, small, blocking, records, gathered, args):
    """Rank 0: the configuration, the document's two rows, every rank's figures and their
    mean."""
    n, k = session.size, args.count
    factor = ALL_REDUCE.busbw_factor(n)
    big_bytes, small_bytes = count * dt.size, small * dt.size
    total_small = small_bytes * k
    out.set(config={**out.doc["config"], "size": big_bytes, "k": k, "chunk": small_bytes,
                    "dtype": dt.name, "warmup": args.warmup, "blocking": blocking,
                    "busbw_factor": factor})
    out.say(f"# 1 x {format_size(big_bytes)} ({count} x {dt.name}) against {k} x "
            f"{format_size(small_bytes)} ({small} x {dt.name}, {total_small} bytes in all), "
            f"{n} rank{'s' if n != 1 else ''}, busbw = algbw x {factor:g}"
            + ("; with one rank busbw is not defined" if factor == 0 else ""))
    # Two rows of the document, each per call as nccl-tests counts it: one of the K calls of
    # S/K bytes (the K calls' time over K), then the one call of S bytes: sizes rising, as
    # nccl-tests prints them, so the printed table reads back as one run.
    c_big, c_small = (ALL_REDUCE.counts(x, dt.size, n) for x in (count, small))
    out.table_header(ALL_REDUCE.name)
    out.add_row(rows.of_collective(ALL_REDUCE, backend.name, dt, c_small, n, "sum", -1, "in_place",
                                   [g[1] / k for g in gathered], calls=k))
    out.add_row(rows.of_collective(ALL_REDUCE, backend.name, dt, c_big, n, "sum", -1, "in_place",
                                   [g[0] for g in gathered], calls=1))
    out.say("")
    part = (big_bytes, total_small, factor)
    out.set(per_rank=_per_rank(out, backend, classic.labels(records), gathered, k, part))
    d1 = mean(g[0] for g in gathered)
    dk = mean(g[1] for g in gathered)
    avg = _row(backend, None, "mean", d1, dk, *part)
    out.say(f"\nmean over ranks: 1 x {format_size(big_bytes)} {classic.ms(d1)} ms, busbw "
            f"{classic.bw_cells(avg['one']['busbw_GBps'])}; {k} x {format_size(small_bytes)} "
            f"{classic.ms(dk)} ms, busbw {classic.bw_cells(avg['many']['busbw_GBps'])}; "
            f"the small calls took {figure(avg['ratio'], '.2f')}x as long")
    out.set(summary=avg)


def _per_rank(out, backend, labels, gathered, k, part):
    """Print every rank's two durations, bandwidths and ratio; their rows (JSON per_rank).
    part: (the big call's bytes, the small calls' bytes together, the busbw factor)."""
    lines, per_rank = [], []
    for r, (d1, dk) in enumerate(gathered):
        row = _row(backend, r, labels[r], d1, dk, *part)
        per_rank.append(row)
        lines.append([labels[r], r, classic.ms(d1), figure(row["one"]["algbw_GBps"]),
                      figure(row["one"]["busbw_GBps"]), classic.ms(dk), figure(row["many"]["algbw_GBps"]),
                      figure(row["many"]["busbw_GBps"]), figure(row["ratio"], ".2f")])
    out.say(tabulate(lines, headers=["host:local_rank", "rank", "1xS ms", "algbw GBps",
                                     "busbw GBps", f"{k}xS/{k} ms", "algbw GBps", "busbw GBps",
                                     "ratio"], disable_numparse=True))
    return per_rank


def _row(backend, rank, label, d1, dk, big_bytes, small_total, factor):
    def part(nbytes, seconds):
        alg = algbw(nbytes, seconds)
        return {"bytes": nbytes, "time_us": seconds * 1e6, "algbw_GBps": alg,
                "busbw_GBps": busbw(alg, factor)}
    return {"collective": ALL_REDUCE.name, "backend": backend.name, "rank": rank, "label": label,
            "one": part(big_bytes, d1), "many": part(small_total, dk),
            "ratio": dk / d1 if d1 > 0 else None}



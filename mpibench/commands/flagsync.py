"""mpibench flagsync: what it costs to agree on a "done" flag, three ways."""
from tabulate import tabulate

from ..errors import CheckFailed
from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.base import Counts
from ..measure.dtypes import DTYPES
from ..results import rows
from ..results.numbers import ratio
from .common import classic, options

HELP = "time a done-flag sync: all_gather_object of an int vs all_gather and all_reduce of a tensor"
DESCRIPTION = (
    "The done-flag comparison: N calls (default 1000) each of all_gather_object of a Python int, "
    "all_gather of a one-element tensor and all_reduce of a one-element tensor (on mpi: "
    "allgather of a pickled int, Allgather and Allreduce of a one-element buffer); time per "
    "call and the speedup of each over all_gather_object. Rank r's flag is r + 1, and every "
    "method must agree on the sum, n(n+1)/2.")
SESSION = "args"

INT64 = DTYPES["int64"]
# method -> (the collective it is, the mode of its row); all_gather_object is none
COLLECTIVES = {ALL_GATHER.name: (ALL_GATHER, "out_of_place"), ALL_REDUCE.name: (ALL_REDUCE, "in_place")}


def add_arguments(p):
    p.add_argument("-n", "--calls", type=options.int_at_least(1), default=1000, metavar="N",
                   help="timed calls of each method (default 1000)")
    p.add_argument("-w", "--warmup", type=options.int_at_least(0), default=10, metavar="N",
                   help="untimed calls of each method first (default 10)")
    classic.add_common(p, dtype=False)


def execute(session, args):
    backend, out, records = classic.begin(session, args, "flagsync",
                                          "three ways to sum a done flag", {})
    n, flag = session.size, session.rank + 1
    one = classic.tensor(session, backend, INT64, 1)
    gathered_t = classic.tensor(session, backend, INT64, n)
    reduced = classic.tensor(session, backend, INT64, 1)
    gather_ctx = classic.ctx(session, backend, INT64, 1, op="none", in_place=False)
    methods = [
        ("all_gather_object", backend.allgather_object(flag), lambda result: sum(result)),
        (ALL_GATHER.name, backend.bind(ALL_GATHER, one, gathered_t, gather_ctx, False),
         lambda _: int(gathered_t.sum())),
        (ALL_REDUCE.name, backend.bind(ALL_REDUCE, reduced, reduced,
                                       classic.ctx(session, backend, INT64, 1), False),
         lambda _: int(reduced.sum())),
    ]
    times, sums = [], []
    names = [m[0] for m in methods]
    for name, call, _ in methods:
        session.watch.arm(f"flagsync: {name}")
        if args.warmup:
            backend.time_loop([call] * args.warmup)
        session.comm.barrier()
        times.append(backend.time_loop([call] * args.calls))   # seconds per call
    session.watch.arm("flagsync: checking the sums")
    for name, call, total in methods:
        # The timed loops summed in place over and over: set the flags again, then check.
        one.fill_(flag)
        reduced.fill_(flag)
        result = call()
        backend.sync()
        sums.append(total(result))
    gathered = session.comm.gather((times, sums), root=0)
    session.watch.disarm()
    verdict = report(session, out, backend, records, args, names, gathered) if session.rank == 0 else None
    verdict = session.comm.bcast(verdict, root=0)     # every rank ends the same way
    if verdict:
        raise CheckFailed(verdict)
    return 0


def report(session, out, backend, records, args, names, gathered):
    """Rank 0: the table; returns the failure message, or None when every method agrees."""
    n = session.size
    expected = n * (n + 1) // 2
    per_call = [sum(g[0][i] for g in gathered) / n for i in range(len(names))]
    slowest = [max(g[0][i] for g in gathered) for i in range(len(names))]
    wrong = [(r, names[i], g[1][i]) for r, g in enumerate(gathered)
             for i in range(len(names)) if g[1][i] != expected]
    out.set(config={**out.doc["config"], "calls": args.calls, "warmup": args.warmup,
                    "expected_sum": expected})
    out.say(f"# {args.calls} calls of each on {n} rank{'s' if n != 1 else ''} ({backend.name}); "
            f"rank r's flag is r+1, so every method must sum to {expected}")
    lines = []
    for i, name in enumerate(names):
        speedup = per_call[0] / per_call[i] if per_call[i] > 0 else None
        sums_i = sorted({g[1][i] for g in gathered})
        # all_gather_object moves a pickled int of no fixed size: its time stands alone
        coll, mode = COLLECTIVES.get(name, (None, "out_of_place"))
        c = Counts(1, n, 1, 1, 0) if coll is ALL_GATHER else Counts(1, 1, 1, 0, 0)
        row = rows.one_mode(name, backend.name, INT64, max(c.send, c.recv) * INT64.size, 1,
                            "sum" if coll is ALL_REDUCE else "none", -1,
                            coll.bw_bytes(c, INT64.size, n) if coll else None,
                            coll.busbw_factor(n) if coll else 0.0, mode,
                            [g[0][i] for g in gathered],
                            [0 if g[1][i] == expected else 1 for g in gathered],
                            method=name, calls=args.calls, time_per_call_us=per_call[i] * 1e6,
                            total_s=per_call[i] * args.calls,
                            slowest_rank_time_per_call_us=slowest[i] * 1e6,
                            speedup_vs_all_gather_object=speedup,
                            sums=[g[1][i] for g in gathered], agrees=sums_i == [expected])
        out.record_row(row)
        lines.append([name, f"{row['total_s']:.4f}", f"{row['time_per_call_us']:.1f}",
                      f"{row['slowest_rank_time_per_call_us']:.1f}",
                      ratio(speedup, missing="n/a"),
                      ",".join(str(s) for s in sums_i), "yes" if row["agrees"] else "NO"])
    out.say(tabulate(lines, headers=["method", "total s (mean rank)", "us/call (mean rank)",
                                     "us/call (slowest rank)", "speedup vs all_gather_object",
                                     "sum", "agrees"], disable_numparse=True))
    out.set(agree=not wrong)
    out.finish()
    if wrong:
        r, name, got = wrong[0]
        return (f"FAILED: {name} summed the flags to {got} on rank {r} "
                f"(host {records[r]['hostname']}), expected {expected}")
    out.say(f"\nall methods agree: the flags sum to {expected} on every rank")
    return None

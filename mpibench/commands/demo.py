"""mpibench demo: the collective-semantics check, rank r holding r, on the real backend."""
import time

from tabulate import tabulate

from ..errors import CheckFailed
from ..launch import faults
from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.broadcast import COLLECTIVE as BROADCAST
from ..measure.collectives.reduce_scatter import COLLECTIVE as REDUCE_SCATTER
from ..measure.collectives.base import Counts
from ..measure.dtypes import DTYPES
from ..results.rows import of_collective
from .common import classic

HELP = "semantics check: rank r holds r; all_reduce, reduce_scatter, all_gather, broadcast"
DESCRIPTION = (
    "Rank r holds r. all_reduce (every rank gets the sum), reduce_scatter of n copies of r "
    "(every rank gets the sum), all_gather (every rank gets 0..n-1) and broadcast from rank 0 "
    "of the world size (every rank gets n). Every rank's before and after is printed in rank "
    "order, each marked PASS or FAIL against the value expected for this world size; exit 1 "
    "on any FAIL.")
SESSION = "args"

INT64 = DTYPES["int64"]
# collective -> n -> (counts of its one-element call, mode, op, root) for its row
SHAPES = {ALL_REDUCE.name: lambda n: (Counts(1, 1, 1, 0, 0), "in_place", "sum", -1),
          REDUCE_SCATTER.name: lambda n: (Counts(n, 1, 1, 0, 1), "out_of_place", "sum", -1),
          ALL_GATHER.name: lambda n: (Counts(1, n, 1, 1, 0), "out_of_place", "none", -1),
          BROADCAST.name: lambda n: (Counts(1, 1, 1, 0, 0), "in_place", "none", 0)}


def add_arguments(p):
    classic.add_common(p, dtype=False)


def execute(session, args):
    backend, out, records = classic.begin(session, args, "demo",
                                          "collective semantics, rank r holds r", {})
    n, r = session.size, session.rank
    total = n * (n - 1) // 2

    def make(values):
        return classic.tensor(session, backend, INT64, len(values), values)

    def ctx(count, **kw):
        return classic.ctx(session, backend, INT64, count, **kw)

    reduced = make([r])
    rs_send, rs_recv = make([r] * n), make([-1])
    ag_send, ag_recv = make([r]), make([-1] * n)
    bcast = make([n if r == 0 else r])
    # (collective, what this rank holds before, the call, what it holds after, expected)
    cases = [
        (ALL_REDUCE, reduced, backend.bind(ALL_REDUCE, reduced, reduced, ctx(1), False),
         reduced, [total]),
        (REDUCE_SCATTER, rs_send, backend.bind(REDUCE_SCATTER, rs_send, rs_recv,
                                               ctx(1, in_place=False), False), rs_recv, [total]),
        (ALL_GATHER, ag_send, backend.bind(ALL_GATHER, ag_send, ag_recv,
                                           ctx(1, op="none", in_place=False), False),
         ag_recv, list(range(n))),
        (BROADCAST, bcast, backend.bind(BROADCAST, bcast, bcast, ctx(1, op="none", root=0), False),
         bcast, [n]),
    ]
    mine = []
    for coll, before, call, after, expected in cases:
        session.watch.arm(f"demo: {coll.name}")
        held = before.tolist()
        start = time.perf_counter()
        call()
        backend.sync()
        seconds = time.perf_counter() - start
        if coll is ALL_REDUCE and faults.get("corrupt", r) is not None:
            after += 1       # test-only switch: this rank's result goes wrong
        mine.append((held, after.tolist(), seconds))
    session.watch.arm("demo: gathering the results")
    gathered = session.comm.gather(mine, root=0)
    session.watch.disarm()
    verdict = report(session, out, backend, records, cases, gathered) if session.rank == 0 else None
    verdict = session.comm.bcast(verdict, root=0)     # every rank ends the same way
    if verdict:
        raise CheckFailed(verdict)
    return 0


def report(session, out, backend, records, cases, gathered):
    """Rank 0: the tables; returns the failure message, or None when all pass."""
    n = session.size
    labels = classic.labels(records)
    failed = []
    out.say(f"# {n} rank{'s' if n != 1 else ''} on {backend.name}; rank r holds r")
    for i, (coll, _, _, _, expected) in enumerate(cases):
        rows, ranks = [], []
        for rank, g in enumerate(gathered):
            before, after, _ = g[i]
            ok = after == expected
            if not ok:
                failed.append((coll.name, rank))
            ranks.append({"rank": rank, "label": labels[rank], "before": before, "after": after,
                          "pass": ok})
            rows.append([rank, labels[rank], _show(before), _show(after), "PASS" if ok else "FAIL"])
        verdict = "PASS" if all(x["pass"] for x in ranks) else "FAIL"
        out.say(f"\n{coll.name}: expected {_show(expected)} on every rank: {verdict}")
        out.say(tabulate(rows, headers=["rank", "host:local_rank", "before", "after", ""],
                         disable_numparse=True))
        # The row's time is that of this one first call (connection set-up included): the
        # demo checks results, it is no benchmark.
        counts, mode, op, root = SHAPES[coll.name](n)
        out.record_row(of_collective(
            coll, backend.name, INT64, counts, n, op, root, mode, [g[i][2] for g in gathered],
            [_wrong(g[i][1], expected) for g in gathered], expected=expected,
            ranks=ranks, **{"pass": verdict == "PASS"}))
    out.set(passed=not failed)
    out.finish()
    if failed:
        colls = sorted({c for c, _ in failed}, key=[c[0].name for c in cases].index)
        coll, rank = failed[0]
        return (f"demo FAILED: {', '.join(colls)} (first: {coll} on rank {rank}, host "
                f"{records[rank]['hostname']})")
    out.say(f"\ndemo: all {len(cases)} collectives PASS on {n} rank{'s' if n != 1 else ''}")
    return None


def _wrong(got, expected):
    """Elements of got that differ from expected (a missing or extra element counts)."""
    return sum(a != b for a, b in zip(got, expected)) + abs(len(got) - len(expected))


def _show(values):
    return str(values[0]) if len(values) == 1 else "[" + ", ".join(str(v) for v in values) + "]"

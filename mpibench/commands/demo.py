"""mpibench demo: the collective-semantics check, rank r holding r, on the real backend."""
from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.broadcast import COLLECTIVE as BROADCAST
from ..measure.collectives.reduce_scatter import COLLECTIVE as REDUCE_SCATTER
from ..measure.collectives.base import Counts
from ..measure.engine import tensor
from ..results import classics
from ..results.classics import INT64
from .common import classic

HELP = "semantics check: rank r holds r; all_reduce, reduce_scatter, all_gather, broadcast"
EXITS = "Exit 1 on any FAIL."

# collective -> n -> (counts of its one-element call, mode, op, root) for its row
SHAPES = {ALL_REDUCE.name: lambda n: (Counts(1, 1, 1, 0, 0), "in_place", "sum", -1),
          REDUCE_SCATTER.name: lambda n: (Counts(n, 1, 1, 0, 1), "out_of_place", "sum", -1),
          ALL_GATHER.name: lambda n: (Counts(1, n, 1, 1, 0), "out_of_place", "none", -1),
          BROADCAST.name: lambda n: (Counts(1, 1, 1, 0, 0), "in_place", "none", 0)}


def add_arguments(p):
    classic.add_common(p, dtype=False)


def execute(session, args):
    backend, out, records = classic.begin(session, args, "collective semantics, rank r holds r")
    n, r = session.size, session.rank
    total = n * (n - 1) // 2
    engine = classic.engine(session, backend, 0)

    def make(values):
        return tensor(session, backend, INT64, len(values), values)

    def bind(coll, send, recv, **kw):
        return engine.bind_checked(coll, send, recv, classic.ctx(session, backend, INT64, 1, **kw))

    reduced = make([r])
    rs_send, rs_recv = make([r] * n), make([-1])
    ag_send, ag_recv = make([r]), make([-1] * n)
    bcast = make([n if r == 0 else r])
    # (collective, what this rank holds before, the call, what it holds after, expected)
    cases = [
        (ALL_REDUCE, reduced, bind(ALL_REDUCE, reduced, reduced), reduced, [total]),
        (REDUCE_SCATTER, rs_send, bind(REDUCE_SCATTER, rs_send, rs_recv, in_place=False), rs_recv, [total]),
        (ALL_GATHER, ag_send, bind(ALL_GATHER, ag_send, ag_recv, op="none", in_place=False),
         ag_recv, list(range(n))),
        (BROADCAST, bcast, bind(BROADCAST, bcast, bcast, op="none", root=0), bcast, [n]),
    ]
    mine = []
    for coll, before, call, after, _ in cases:
        session.watch.arm(f"demo: {coll.name}")
        held = before.tolist()
        seconds, _ = engine.time_calls(call, 1, first=False)    # the one call: no warm-up
        mine.append((held, after.tolist(), seconds))
    shapes = [(c[0], *SHAPES[c[0].name](n), c[4]) for c in cases]
    return classic.conclude(session, mine, "demo: gathering the results",
                            lambda gathered: classics.demo(out, backend.name, shapes, records, gathered))

"""mpibench demo: the collective-semantics check, rank r holding r, on the real backend."""
import argparse
from typing import List, Optional, Tuple

from ..launch.session import Session
from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.broadcast import COLLECTIVE as BROADCAST
from ..measure.collectives.reduce_scatter import COLLECTIVE as REDUCE_SCATTER
from ..measure.collectives.base import Counts, Tensor
from ..measure.engine import tensor
from ..results import classics
from .common import classic

HELP = "semantics check: rank r holds r; all_reduce, reduce_scatter, all_gather, broadcast"
EXITS = "Exit 1 on any FAIL."


def add_arguments(p: argparse.ArgumentParser) -> None:
    classic.add_common(p, dtype=False)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend, out, records = classic.begin(session, args)
    n, r = session.size, session.rank
    total = n * (n - 1) // 2
    engine = classic.engine(session, backend, 0)

    def make(values: List[int]) -> Tensor:
        return tensor(session, backend, classics.INT64, len(values), values)

    # (collective, counts of its one-element call, mode, op, root, expected): its call and its row
    shapes: List[classics.Case] = [(ALL_REDUCE, Counts(1, 1, 1, 0, 0), "in_place", "sum", -1, [total]),
              (REDUCE_SCATTER, Counts(n, 1, 1, 0, 1), "out_of_place", "sum", -1, [total]),
              (ALL_GATHER, Counts(1, n, 1, 1, 0), "out_of_place", "none", -1, list(range(n))),
              (BROADCAST, Counts(1, 1, 1, 0, 0), "in_place", "none", 0, [n])]
    reduced, bcast = make([r]), make([n if r == 0 else r])
    # each call's buffers: what this rank sends and holds before, what it holds after
    buffers = [(reduced, reduced), (make([r] * n), make([-1])), (make([r]), make([-1] * n)), (bcast, bcast)]
    mine: List[Tuple[List[int], List[int], float]] = []
    for (coll, _, mode, op, root, _), (before, after) in zip(shapes, buffers):
        call = engine.bind_checked(coll, before, after, classic.ctx(
            session, backend, classics.INT64, 1, op=op, root=root, in_place=mode == "in_place"))
        session.watch.arm(f"demo: {coll.name}")
        held = before.tolist()
        seconds, _ = engine.time_calls(call, 1, first=False)    # the one call: no warm-up
        mine.append((held, after.tolist(), seconds))

    def judge(gathered: List[List[Tuple[List[int], List[int], float]]]) -> Optional[str]:
        assert out is not None      # rank 0 judges
        return classics.demo(out, records, gathered, backend=backend.name, cases=shapes)
    return classic.conclude(session, mine, "demo: gathering the results", judge)

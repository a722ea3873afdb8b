"""mpibench flagsync: what it costs to agree on a "done" flag, three ways."""
import argparse
from typing import Any, Callable, List, Optional, Tuple

from ..launch.session import Session
from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.base import Call
from ..measure.engine import tensor
from ..results import classics
from .common import classic, options

HELP = "time a done-flag sync: all_gather_object of an int vs all_gather and all_reduce of a tensor"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--calls", type=options.at_least(1), default=1000, metavar="N",
                   help="timed calls of each method (default 1000)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=10, metavar="N",
                   help="untimed calls of each method first (default 10)")
    classic.add_common(p, dtype=False)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend, out, records = classic.begin(session, args)
    n, flag = session.size, session.rank + 1
    one, gathered_t, reduced = (tensor(session, backend, classics.INT64, k) for k in (1, n, 1))
    methods: List[Tuple[str, Call, Callable[[Any], int]]] = [
        ("all_gather_object", backend.allgather_object(flag), sum),
        (ALL_GATHER.name, backend.bind(ALL_GATHER, one, gathered_t, classic.ctx(
            session, backend, classics.INT64, 1, op="none", in_place=False), False),
         lambda _: int(gathered_t.sum())),
        (ALL_REDUCE.name, backend.bind(ALL_REDUCE, reduced, reduced,
                                       classic.ctx(session, backend, classics.INT64, 1), False),
         lambda _: int(reduced.sum())),
    ]
    engine = classic.engine(session, backend, args.warmup)
    times: List[float] = []
    sums: List[int] = []
    for name, call, _ in methods:
        session.watch.arm(f"flagsync: {name}")
        times.append(engine.time_calls(call, args.calls, first=False)[0])   # seconds per call
    session.watch.arm("flagsync: checking the sums")
    for _, call, total in methods:
        # The timed loops summed in place over and over: set the flags again, then check.
        one.fill_(flag)
        reduced.fill_(flag)
        result = call()
        backend.sync()
        sums.append(total(result))

    def judge(gathered: List[Tuple[List[float], List[int]]]) -> Optional[str]:
        assert out is not None      # rank 0 judges
        return classics.flagsync(out, records, gathered, backend=backend.name, names=[m[0] for m in methods],
                                 calls=args.calls, warmup=args.warmup)
    return classic.conclude(session, (times, sums), None, judge)

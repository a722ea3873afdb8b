"""mpibench latency: one all_reduce of S bytes against K all_reduces of S/K bytes each."""
import argparse
from typing import List, Tuple

from ..errors import UsageError
from ..launch.session import Session
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.engine import tensor
from ..measure.sizes import format_size
from ..results import classics
from .common import classic, options

HELP = "1 x S against K x S/K all_reduces of the same total bytes, per rank"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--size", type=options.size_arg, default=None, metavar="S",
                   help="total bytes (default 4G on GPUs, 64M on CPUs)")
    p.add_argument("-k", "--count", type=options.at_least(1), default=1000, metavar="K",
                   help="number of small all_reduces, each of S/K bytes (default 1000)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=2, metavar="N",
                   help="untimed calls of each size first (default 2)")
    classic.add_common(p)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend, out, records, dt, size = classic.begin_all_reduce(session, args, args.size)
    count = size // dt.size
    small = count // args.count
    if small < 1:
        raise UsageError(f"-k {args.count} is larger than S in elements ({format_size(size)} "
                         f"is {count} {dt.name} elements)")
    blocking = backend.default_blocking()
    buf = tensor(session, backend, dt, count)
    part = buf[:small]
    big = backend.bind(ALL_REDUCE, buf, buf, classic.ctx(session, backend, dt, count), False)
    little = backend.bind(ALL_REDUCE, part, part, classic.ctx(session, backend, dt, small), False)
    session.watch.arm("latency: the big call")
    one, _ = classic.engine(session, backend, args.warmup).time_calls(big, 1, first=False)
    session.watch.arm("latency: the small calls")
    many, _ = classic.engine(session, backend, args.warmup, blocking).time_calls(little, args.count,
                                                                               first=False)

    def judge(gathered: List[Tuple[float, float]]) -> None:
        assert out is not None      # rank 0 judges
        classics.latency(out, records, gathered, backend=backend.name, dt=dt, count=count, small=small,
                         k=args.count, warmup=args.warmup, blocking=blocking)
    return classic.conclude(session, (one, many * args.count), "latency: gathering the times", judge)

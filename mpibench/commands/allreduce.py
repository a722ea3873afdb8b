"""mpibench allreduce: the classic single-payload all_reduce bandwidth test, per rank."""
import argparse
from typing import List

from ..errors import UsageError
from ..launch.session import Session
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.engine import tensor
from ..results import classics
from .common import classic, options

HELP = "the classic all_reduce bandwidth test: one big payload, per-trial and per-rank algbw/busbw"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--size", dest="payload", type=options.size_arg, default=None,
                   metavar="SIZE", help="bytes per all_reduce (default 4G on GPUs, 64M on CPUs)")
    p.add_argument("-n", "--iters", dest="trials", type=options.at_least(1), default=5,
                   metavar="N", help="timed calls, each after a barrier (default 5)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=2, metavar="N",
                   help="untimed calls first (default 2)")
    classic.add_common(p)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend, out, records, dt, payload = classic.begin_all_reduce(session, args, args.payload)
    count = payload // dt.size
    if count < 1:
        raise UsageError(f"--size {payload} is less than one {dt.name} element")
    # The trials each after a barrier, only the calls timed: -z 3.
    engine = classic.engine(session, backend, args.warmup, blocking=3)
    buf = tensor(session, backend, dt, count)
    call = backend.bind(ALL_REDUCE, buf, buf, classic.ctx(session, backend, dt, count), False)
    session.watch.arm("allreduce: timed trials")
    _, times = engine.time_calls(call, args.trials, first=False)
    assert times is not None        # per_iter: each call's seconds

    def judge(gathered: List[List[float]]) -> None:
        assert out is not None      # rank 0 judges
        classics.allreduce(out, records, gathered, backend=backend.name, dt=dt, count=count,
                           warmup=args.warmup)
    return classic.conclude(session, times, "allreduce: gathering the times", judge)

"""What the classic commands (allreduce, latency, flagsync, demo) share: one backend,
the run-style preamble and results document, and the engine that times their calls
(results/classics.py prints what they measured)."""
import argparse
from typing import Callable, List, Optional, Tuple, TypeVar

from ...diagnose import rankfacts
from ...errors import UsageError
from ...launch.session import Session
from ...measure.backends import make
from ...measure.backends.torchdist import TorchBackend
from ...measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ...measure.collectives.base import Ctx
from ...measure.engine import Engine, Plan
from ...measure.dtypes import DType, parse_dtypes
from ...results import classics
from ...results.output import RunOutput, open_output
from . import guard, options

# The payload of allreduce and of latency's one big call (nccl-tests' largest GPU size; what
# a CPU host moves in well under a second).
GPU_PAYLOAD, CPU_PAYLOAD = 4 << 30, 64 << 20
T = TypeVar("T")


def add_common(p: argparse.ArgumentParser, dtype: bool = True) -> None:
    if dtype:
        p.add_argument("-d", "--dtype", default="float32", metavar="NAME",
                       help="data type (default float32): float32, float16, bfloat16, float64, "
                            "int32, int64, int8, uint8")
    options.add_backend(p)
    guard.add_timeout(p, "start-up, the warm-up, the timed calls of one kind, or gathering")
    options.add_json(p, metrics=False)


def begin(session: Session, args: argparse.Namespace
          ) -> Tuple[TorchBackend, Optional[RunOutput], classics.Records]:
    """The backend, the output (rank 0) and every rank's record; prints the preamble."""
    command = args.command
    session.watch.arm(f"{command}: start-up (every rank's device and versions)")
    backend = make(session, args.backend[0])
    out = open_output(session, command, args)
    records, versions = rankfacts.gather(session)
    if session.rank == 0:
        assert out is not None
        out.say(classics.TITLES[command])
        rankfacts.describe(session, out, [backend.name], records, versions, {})
        out.announce_files()
    return backend, out, records or []         # none off rank 0, which alone prints


def begin_all_reduce(session: Session, args: argparse.Namespace, size: Optional[int]
                     ) -> Tuple[TorchBackend, Optional[RunOutput], classics.Records, DType, int]:
    """begin() for allreduce and latency, with the one data type (-d) their all_reduce sums and
    its payload: size, or the default on the backend's device."""
    dtypes = parse_dtypes(args.dtype)
    if len(dtypes) != 1:
        raise UsageError(f"-d {args.dtype}: give one data type")
    backend, out, records = begin(session, args)
    if reason := backend.unsupported(ALL_REDUCE, dtypes[0], "sum"):
        raise UsageError(f"{ALL_REDUCE.name} -d {dtypes[0].name} on {backend.name}: {reason}")
    return backend, out, records, dtypes[0], size or (GPU_PAYLOAD if backend.cuda else CPU_PAYLOAD)


def conclude(session: Session, mine: T, where: Optional[str],
             judge: Callable[[List[T]], Optional[str]]) -> int:
    """mine gathered to rank 0 (the watchdog's step: where, if given), which prints it and
    judges (judge(gathered): the failure or None); every rank ends as rank 0 judged."""
    if where:
        session.watch.arm(where)
    gathered = session.comm.gather(mine, root=0)
    session.watch.disarm()
    return guard.verdict(session, judge(gathered or []) if session.rank == 0 else None)


def engine(session: Session, backend: TorchBackend, warmup: int, blocking: int = 2) -> Engine:
    """The engine that times one bound call at a time (blocking: -z's, 2 waits for each call)."""
    return Engine(session, backend, Plan([], [], [], [], warmup=warmup, blocking=blocking), None)


def ctx(session: Session, backend: TorchBackend, dtype: DType, count: int, op: str = "sum", root: int = -1,
        in_place: bool = True) -> Ctx:
    return Ctx(rank=session.rank, n=session.size, root=root, op=op, dtype=dtype, count=count,
               in_place=in_place, backend_op=backend.ops.get(op), device=backend.device)

"""What `verify` measures: mpibench's own loop (the engine, as `run` times a row) against
the bare loop of baretimer.py, alternated over rounds; the per-call cost; one checked call
of every collective. Figures only: the judgement is diagnose/verifyjudge.py's.
"""
import time
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..launch.comm import MPIComm
from ..launch.session import Session
from . import baretimer, launchcost
from .backends.torchdist import TorchBackend
from .collectives import REGISTRY
from .collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from .dtypes import DTYPES
from .engine import Engine, Plan
from .modes import MODES
from .row import Row

FLOAT32 = DTYPES["float32"]
Rounds = Dict[int, Dict[str, Any]]     # compare_timers' figures: see there


class Rows(List[Row]):
    """The engine's report on rank 0: its rows, kept instead of printed."""
    add_row = list.append

    def set(self, *args: Any, **items: Any) -> None:
        """Nothing else of a report is kept."""

    table_header = add_probe = set


def engine_rows(session: Session, backend: TorchBackend, plan: Plan) -> Tuple[Optional[List[Row]], int]:
    """(rows on rank 0, else None; wrong elements) of plan run through the engine."""
    report = Rows() if session.rank == 0 else None
    wrong = Engine(session, backend, plan, report, quiet=True).run()     # verify prints its own table
    return report, wrong


def repeated_rows(session: Session, backend: TorchBackend, plan: Plan,
                  rounds: int) -> Tuple[Optional[List[Row]], int]:
    """engine_rows of `rounds` runs: per row the fastest round's (as NetPIPE keeps its best
    trial); wrong elements over all rounds."""
    runs, wrong = [], 0
    for _ in range(rounds):
        rows, w = engine_rows(session, backend, plan)
        runs.append(rows or [])
        wrong += w
    if session.rank != 0:
        return None, wrong
    return [min(same, key=lambda r: next(m["time_us"] for k in MODES if (m := r.get(k))))
            for same in zip(*runs)], wrong


def all_reduce_plan(backend: TorchBackend, sizes: Sequence[int], iters: int, warmup: int) -> Plan:
    return Plan(collectives=[ALL_REDUCE], sizes=list(sizes), dtypes=[FLOAT32], ops=["sum"],
                iters=iters, warmup=warmup, check=0, blocking=backend.default_blocking(),
                modes=("in",), probe_iters=0)


def compare_timers(session: Session, backend: TorchBackend, sizes: Sequence[int], *, iters: int,
                   warmup: int, progress: Callable[[Rounds, int], None],
                   pick: Callable[[Rounds], Optional[int]]) -> Optional[Rounds]:
    """Both timers, a pair of rounds (A B B A, docs/verify.md) at a time at the size rank
    0's pick(got) names (None ends). Rank 0 gets
    {size: {"harness": [s per round], "bare": [...], "rows": [engine row per round],
    "seconds": wall time}}, times the mean over ranks; progress(got, size) after each round."""
    # The independent timer's loop per size (float32, in place) on the backend's library:
    # torch.distributed, or MPI through a communicator of its own. The barrier mpibench's
    # loop has; GPUs: a stream of its own (baretimer.py says why).
    bufs = {s: backend.typed(backend.alloc(s), FLOAT32) for s in sizes}
    mpi = session.comm if backend.name == "mpi" else None
    assert mpi is None or isinstance(mpi, MPIComm)      # the mpi backend needs an MPI launcher
    comm = mpi.world.Dup() if mpi is not None else None
    stream = backend.torch.cuda.Stream(backend.device) if backend.cuda else None
    bare: Dict[int, Callable[[int], float]] = {s: (
        partial(baretimer.mpi_seconds, mpi.MPI, comm, b.numpy()) if mpi is not None and comm
        else partial(baretimer.torch_seconds, backend.dist, b, barrier=session.comm.barrier,
                     stream=stream)) for s, b in bufs.items()}
    plans = {s: all_reduce_plan(backend, [s], iters, warmup) for s in sizes}
    got: Rounds = {s: {"harness": [], "bare": [], "rows": [], "seconds": 0.0} for s in sizes}
    try:
        while (s := session.comm.bcast(pick(got) if session.rank == 0 else None, root=0)):
            for order in (("harness", "bare"), ("bare", "harness")):
                _one_round(session, backend, plans[s], bare[s], order, got[s], size=s, iters=iters,
                           warmup=warmup)
                if session.rank == 0:
                    progress(got, s)
    finally:
        if comm is not None:
            comm.Free()
    return got if session.rank == 0 else None


def _one_round(session: Session, backend: TorchBackend, plan: Plan, bare: Callable[[int], float],
               order: Tuple[str, str], got: Dict[str, Any], *, size: int, iters: int, warmup: int) -> None:
    """Both timers at one size in this order; rank 0 adds the round to got (the size's record)."""
    rows: Any = None
    mine, t0 = None, time.monotonic()
    for which in order:
        if which == "harness":
            rows, _ = engine_rows(session, backend, plan)
        else:
            session.watch.arm(f"verify: the bare loop at {size} bytes, round {len(got['bare']) + 1}")
            if warmup:      # untimed calls, a loop of their own
                bare(warmup)
            mine = bare(iters)
    assert mine is not None     # both orders time the bare loop
    gathered = session.comm.gather(mine, root=0)
    if session.rank == 0:
        assert gathered is not None
        got["harness"].append(rows[0]["in_place"]["time_us"] * 1e-6)
        got["rows"].append(rows[0])
        got["bare"].append(sum(gathered) / len(gathered))
        got["seconds"] += time.monotonic() - t0


def median_row(rows: List[Row], times: List[float]) -> Row:
    """The engine row of the median round (the lower median for an even count)."""
    return rows[sorted(range(len(times)), key=times.__getitem__)[(len(times) - 1) // 2]]


def gpu_launch_seconds(session: Session, backend: TorchBackend) -> Optional[float]:
    """The slowest rank's host seconds per call launch on GPUs; None on CPUs."""
    if not backend.cuda:
        return None
    session.watch.arm("verify: the launch cost")
    return float(max(session.comm.allgather(launchcost.of_backend(backend, session.comm.barrier))))


def correctness(session: Session, backend: TorchBackend, size: int,
                graph: int = 0) -> Tuple[Optional[List[Row]], int]:
    """engine_rows of every collective once at size, both modes, checked (float32, sum)."""
    plan = Plan(collectives=list(REGISTRY.values()), sizes=[size], dtypes=[FLOAT32], ops=["sum"],
                iters=1, warmup=0, blocking=backend.default_blocking(), graph=graph, probe_iters=0)
    return engine_rows(session, backend, plan)

"""The test switches that act inside the engine and the backend (docs/testing.md), installed
on them only when one is on for this rank: the timed code itself holds no test branch."""
from functools import partial
from typing import Any, List, Optional, Tuple

from ..launch import faults
from ..launch.watchdog import TIMED_LOOP
from .collectives.base import poison_value
from .sizes import parse_size


def install(target: Any, rank: int) -> None:
    """Wrap the methods of an Engine, or of a backend (it has alloc), with rank's switches."""
    if hasattr(target, "alloc"):
        if faults.get("oom", rank) is not None:
            alloc = target.alloc

            def refusing(nbytes: int) -> Any:
                refuse(rank, nbytes)
                return alloc(nbytes)
            target.alloc = refusing
        if (at := faults.get("loopcrash", rank)) is not None:
            _wrap_loop(target, int(at) if at.isdigit() else 1)
        return
    rows = sorted((parse_size(arg), kind) for arg, kind in faults.row_faults(rank))
    early = faults.get("early", rank)
    if rows or early:
        _wrap_measure(target, rows, early)
    corrupt, graphcorrupt = faults.get("corrupt", rank), faults.get("graphcorrupt", rank)
    if corrupt is not None or graphcorrupt is not None:
        _wrap_check(target, corrupt, graphcorrupt is not None)


def _wrap_measure(engine: Any, rows: List[Tuple[int, str]], early: Optional[str]) -> None:
    """Row faults trip at the first row of their size or more; early divides the seconds."""
    measure = engine.measure
    try:
        factor = max(1.0, float(early)) if early else 1.0
    except ValueError:
        factor = 1.0

    def _measure(coll: Any, send_t: Any, recv_t: Any, c: Any, mode: str, ctx: Any,
                 check_rounds: int) -> Tuple[Any, ...]:
        if rows and max(c.send, c.recv) * ctx.dtype.size >= rows[0][0]:
            faults.trip(rows.pop(0)[1])
        seconds, *rest = measure(coll, send_t, recv_t, c, mode, ctx, check_rounds)
        return (seconds / factor, *rest)
    engine.measure = _measure


def _wrap_loop(backend: Any, k: int) -> None:
    """loopcrash:RANK:K: the K-th call this rank makes in its timed loops raises, mid-loop
    (the loops of warm-up, first call and check are not counted)."""
    time_loop, made = backend.time_loop, [0]

    def counted(call: Any) -> Any:
        def call_or_raise() -> Any:
            made[0] += 1
            if made[0] == k:
                faults.trip("loopcrash")
            return call()
        return call_or_raise

    def _time_loop(calls: Any, *args: Any, **kwargs: Any) -> Any:
        if backend.session.watch is not None and backend.session.watch.phase == TIMED_LOOP:
            calls = [counted(c) for c in calls]
        return time_loop(calls, *args, **kwargs)
    backend.time_loop = _time_loop


def _wrap_check(engine: Any, corrupt: Optional[str], graphcorrupt: bool) -> None:
    """corrupt: bind_checked's calls leave a wrong first element; graphcorrupt: the check's
    captured graph adds 1 to it."""
    if corrupt is not None:
        bind = engine.bind_checked

        def bind_poisoned(coll: Any, sv: Any, rv: Any, ctx: Any) -> Any:
            call = bind(coll, sv, rv, ctx)
            bad = float("nan") if corrupt == "nan" else poison_value(ctx.dtype)
            return lambda: (call(), rv[:1].fill_(bad))
        engine.bind_checked = bind_poisoned
    if graphcorrupt:
        check, b = engine.check, engine.b

        def _check(coll: Any, view: Any, ctx: Any, rounds: int) -> Any:
            captured = b.captured
            b.captured = lambda calls: captured(list(calls) + [partial(view[1][:1].add_, 1)])
            try:
                return check(coll, view, ctx, rounds)
            finally:
                b.captured = captured
        engine.check = _check


def refuse(rank: int, nbytes: int) -> None:
    """oom:RANK:SIZE: a buffer (or train's model state) of SIZE bytes or more is refused."""
    limit = faults.get("oom", rank)
    if limit is not None and nbytes >= parse_size(limit):
        raise MemoryError(f"test fault switch MPIBENCH_FAULT=oom: refusing {nbytes} bytes")

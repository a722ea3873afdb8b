"""The test switches that act inside the engine and the backend (launch/faults.py), installed
on them only when one is on for this rank: the timed code itself holds no test branch."""
from functools import partial

from ..launch import faults
from .collectives.base import poison_value
from .sizes import parse_size


def install(target, rank):
    """Wrap the methods of an Engine, or of a backend (it has alloc), with the switches on for
    RANK; with none on, target stays as it was."""
    if hasattr(target, "alloc"):
        if faults.get("oom", rank) is not None:
            alloc = target.alloc
            target.alloc = lambda nbytes, r: (refuse(r, nbytes), alloc(nbytes, r))[1]
        return
    rows = sorted((parse_size(arg), kind) for arg, kind in faults.row_faults(rank))
    early = faults.get("early", rank)
    if rows or early:
        _wrap_measure(target, rows, early)
    corrupt, graphcorrupt = faults.get("corrupt", rank), faults.get("graphcorrupt", rank)
    if corrupt is not None or graphcorrupt is not None:
        _wrap_check(target, corrupt, graphcorrupt is not None)


def _wrap_measure(engine, rows, early):
    """Row faults trip at the first row of their size or more; early:RANK:X divides every
    timed loop's seconds by X (the timer stops early)."""
    measure = engine.measure
    try:
        factor = max(1.0, float(early)) if early else 1.0
    except ValueError:
        factor = 1.0

    def _measure(coll, send_t, recv_t, c, mode, ctx, check_rounds):
        if rows and max(c.send, c.recv) * ctx.dtype.size >= rows[0][0]:
            faults.trip(rows.pop(0)[1])
        seconds, *rest = measure(coll, send_t, recv_t, c, mode, ctx, check_rounds)
        return (seconds / factor, *rest)
    engine.measure = _measure


def _wrap_check(engine, corrupt, graphcorrupt):
    """Within the calls whose output is read only (the data check's, demo's): the call
    leaves a wrong first element (corrupt: the poison value, what recv held before the
    call; corrupt:RANK:nan: NaN), or the check's captured graph also adds 1 to it, which
    only a replay does (graphcorrupt, -G)."""
    if corrupt is not None:
        bind = engine.bind_checked

        def bind_poisoned(coll, sv, rv, ctx):
            call = bind(coll, sv, rv, ctx)
            bad = float("nan") if corrupt == "nan" else poison_value(ctx.dtype)
            return lambda: (call(), rv[:1].fill_(bad))
        engine.bind_checked = bind_poisoned
    if graphcorrupt:
        check, b = engine.check, engine.b

        def _check(coll, view, ctx, rounds):
            captured = b.captured
            b.captured = lambda calls: captured(list(calls) + [partial(view[1][:1].add_, 1)])
            try:
                return check(coll, view, ctx, rounds)
            finally:
                b.captured = captured
        engine.check = _check


def refuse(rank, nbytes):
    """oom:RANK:SIZE: a buffer (or train's model state) of SIZE bytes or more is refused."""
    limit = faults.get("oom", rank)
    if limit is not None and nbytes >= parse_size(limit):
        raise MemoryError(f"test fault switch MPIBENCH_FAULT=oom: refusing {nbytes} bytes")

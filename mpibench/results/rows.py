"""Rows of a results document: their key; a row from every rank's time, shaped as a row of `run`
(nccl-tests' keys, one mode) for the commands that time one collective at a time, so that report,
compare and plot read every file alike; and run --trials' merge (docs/results-document.md)."""
from statistics import mean, median, pstdev
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..measure.collectives.base import Collective, Counts, algbw, busbw
from ..measure.dtypes import DType
from ..measure.modes import MODES


def key(row: Dict[str, Any], mode: Optional[str] = None, backend: bool = True) -> Tuple[Any, ...]:
    """What lines a row up: across trials (mode None), files (compare), backends (backend False)."""
    return (row["collective"], row.get("backend", "?") if backend else None,
            row.get("dtype", row["type"]), row["redop"], row["root"],
            row.get("setting", "") + row.get("link", ""), row["size"], mode)


def one_mode(collective: str, mode: str, seconds: Sequence[float], *, backend: str, dtype: DType, size: int,
             count: int, bw_bytes: Optional[int], factor: float, redop: str = "none", root: int = -1,
             wrong: Optional[Sequence[Optional[int]]] = None, **extra: Any) -> Dict[str, Any]:
    """A row measured in one mode (in_place or out_of_place). seconds[r]: rank r's time per call,
    their mean the row's (nccl-tests' -a 1); wrong[r]: rank r's wrong elements (None: not
    checked); bw_bytes None: no bandwidth is defined for what was timed."""
    assert mode in MODES, mode
    t = mean(seconds)
    alg = algbw(bw_bytes, t) if bw_bytes is not None else None
    checked = wrong is not None and any(w is not None for w in wrong)
    figures = {"time_us": t * 1e6, "algbw_GBps": alg,
               "busbw_GBps": busbw(alg, factor) if alg is not None else None,
               "nwrong": sum(w or 0 for w in wrong or []) if checked else None}
    return {"collective": collective, "backend": backend, "size": size, "count": count,
            "type": dtype.label, "dtype": dtype.name, "redop": redop, "root": root,
            "bw_bytes": bw_bytes, "busbw_factor": factor, "out_of_place": None, "in_place": None,
            mode: figures, "per_rank_time_us": {mode: [s * 1e6 for s in seconds]},
            "per_rank_nwrong": {mode: list(wrong) if wrong is not None else [None] * len(seconds)}, **extra}


def of_collective(coll: Collective, c: Counts, n: int, mode: str, seconds: Sequence[float], *,
                  backend: str, dtype: DType, **extra: Any) -> Dict[str, Any]:
    """one_mode() for a collective module's counts c on n ranks (nccl-tests' size, count and bytes)."""
    return one_mode(coll.name, mode, seconds, backend=backend, dtype=dtype, count=c.param,
                    size=max(c.send, c.recv) * dtype.size, bw_bytes=coll.bw_bytes(c, dtype.size, n),
                    factor=coll.busbw_factor(n), **extra)


UNSTABLE = 0.10   # default: a row whose times span more than 10% of their median


def merge(trial_rows: List[Dict[str, Any]], threshold: float = UNSTABLE) -> Dict[str, Any]:
    """One row from the same row of every trial (same collective, size, type, modes)."""
    first, kept = trial_rows[0], (*MODES, "per_rank_time_us", "per_rank_nwrong")
    row = {k: v for k, v in first.items() if k not in kept and k != "trials"}
    row["trials"] = [{k: t[k] for k in kept} for t in trial_rows]
    folds: Dict[str, Callable[[Tuple[Any, ...]], Any]] = {
        "per_rank_time_us": median, "per_rank_nwrong": lambda x: None if None in x else sum(x)}
    for field, fold in folds.items():      # each rank's over the trials
        row[field] = {mode: [fold(x) for x in zip(*(t[field][mode] for t in trial_rows))]
                      for mode in first[field]}
    for mode in MODES:
        modes = [t[mode] for t in trial_rows]
        row[mode] = None if first[mode] is None else _merged_mode(row, modes, threshold)
    row["unstable_threshold"] = threshold
    return row


def _merged_mode(row: Dict[str, Any], modes: List[Dict[str, Any]], threshold: float) -> Dict[str, Any]:
    """One mode's figures over the trials: the median time, its spread, unstable beyond threshold."""
    times = [m["time_us"] for m in modes]
    mid, avg = median(times), mean(times)
    span = (max(times) - min(times)) / mid if mid > 0 else 0.0
    alg = algbw(row["bw_bytes"], mid / 1e6)
    wrongs = [m["nwrong"] for m in modes]
    busbws = [m["busbw_GBps"] for m in modes]
    return {"time_us": mid, "algbw_GBps": alg, "busbw_GBps": busbw(alg, row["busbw_factor"]),
            "nwrong": None if all(w is None for w in wrongs) else sum(w or 0 for w in wrongs),
            "in_flight": modes[0].get("in_flight"),
            "spread": {"trials": len(modes), "time_us_min": min(times), "time_us_max": max(times),
                       "cv": pstdev(times) / avg if avg > 0 else 0.0, "range": span,
                       "busbw_GBps_min": None if None in busbws else min(busbws),
                       "busbw_GBps_max": None if None in busbws else max(busbws)},
            "unstable": span > threshold}


class Collector:
    """run --trials on rank 0: each trial's row merged with the same row of the earlier trials."""

    def __init__(self, threshold: float = UNSTABLE) -> None:
        self.threshold = threshold
        # rows.key -> (index in results, [that row of each trial])
        self.rows: Dict[Tuple[Any, ...], Tuple[int, List[Dict[str, Any]]]] = {}

    def add(self, results: List[Optional[Dict[str, Any]]], row: Dict[str, Any]) -> None:
        k = key(row)
        if k not in self.rows:
            self.rows[k] = (len(results), [])
            results.append(None)
        index, seen = self.rows[k]
        seen.append(row)
        results[index] = merge(seen, self.threshold)

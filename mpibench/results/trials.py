"""Repeated sweeps (run --trials K): one row per size from K measurements of it: the medians
under nccl-tests' keys, every trial under `trials`, and per mode a `spread` (min, max, cv of
the time) and `unstable` when (max - min) / median exceeds a threshold."""
from statistics import mean, median, pstdev
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..measure.collectives.base import algbw, busbw
from ..measure.modes import MODES
from . import rows

UNSTABLE = 0.10   # default: a row whose times span more than 10% of their median


def merge(trial_rows: List[Dict[str, Any]], threshold: float = UNSTABLE) -> Dict[str, Any]:
    """One row from the same row of every trial (same collective, size, type, modes)."""
    first, kept = trial_rows[0], (*MODES, "per_rank_time_us", "per_rank_nwrong")
    row = {k: v for k, v in first.items() if k not in kept and k != "trials"}
    row["trials"] = [{k: t[k] for k in kept} for t in trial_rows]
    folds: Dict[str, Callable[[Tuple[Any, ...]], Any]] = {
        "per_rank_time_us": median, "per_rank_nwrong": lambda x: None if None in x else sum(x)}
    for field, fold in folds.items():      # each rank's over the trials
        row[field] = {key: [fold(x) for x in zip(*(t[field][key] for t in trial_rows))]
                      for key in first[field]}
    for key in MODES:
        if first[key] is None:
            row[key] = None
            continue
        times = [t[key]["time_us"] for t in trial_rows]
        mid, avg = median(times), mean(times)
        span = (max(times) - min(times)) / mid if mid > 0 else 0.0
        alg = algbw(row["bw_bytes"], mid / 1e6)
        wrongs = [t[key]["nwrong"] for t in trial_rows]
        busbws = [t[key]["busbw_GBps"] for t in trial_rows]
        row[key] = {"time_us": mid, "algbw_GBps": alg, "busbw_GBps": busbw(alg, row["busbw_factor"]),
                    "nwrong": None if all(w is None for w in wrongs) else sum(w or 0 for w in wrongs),
                    "in_flight": first[key].get("in_flight"),
                    "spread": {"trials": len(trial_rows), "time_us_min": min(times),
                               "time_us_max": max(times),
                               "cv": pstdev(times) / avg if avg > 0 else 0.0, "range": span,
                               "busbw_GBps_min": None if None in busbws else min(busbws),
                               "busbw_GBps_max": None if None in busbws else max(busbws)},
                    "unstable": span > threshold}
    row["unstable_threshold"] = threshold
    return row


class Collector:
    """run --trials on rank 0: each trial's row merged with the same row of the earlier trials."""

    def __init__(self, threshold: float = UNSTABLE) -> None:
        self.threshold = threshold
        # rows.key -> (index in results, [that row of each trial])
        self.rows: Dict[Tuple[Any, ...], Tuple[int, List[Dict[str, Any]]]] = {}

    def add(self, results: List[Optional[Dict[str, Any]]], row: Dict[str, Any]) -> None:
        k = rows.key(row)
        if k not in self.rows:
            self.rows[k] = (len(results), [])
            results.append(None)
        index, seen = self.rows[k]
        seen.append(row)
        results[index] = merge(seen, self.threshold)

"""Repeated sweeps (run --trials K): one row per size from K measurements of it.

A row's figures are the medians over the trials, where readers expect nccl-tests' keys; it
keeps every trial under `trials`, and each mode a `spread` (min, max, coefficient of
variation of the time) and `unstable` when (max - min) / median exceeds a threshold.
"""
from statistics import mean, median, pstdev

from ..measure.collectives.base import algbw, busbw
from ..measure.modes import MODES
from . import rows

UNSTABLE = 0.10   # default: a row whose times span more than 10% of their median


def spread(values):
    """{'median', 'min', 'max', 'cv', 'range'} of a list of positive numbers."""
    mid = median(values)
    avg = mean(values)
    return {"median": mid, "min": min(values), "max": max(values),
            "cv": pstdev(values) / avg if avg > 0 else 0.0,
            "range": (max(values) - min(values)) / mid if mid > 0 else 0.0}


def merge(trial_rows, threshold=UNSTABLE):
    """One row from the same row of every trial (same collective, size, type, modes)."""
    first = trial_rows[0]
    row = {k: v for k, v in first.items()
           if k not in MODES and k not in ("per_rank_time_us", "per_rank_nwrong", "trials")}
    row["trials"] = [{k: t[k] for k in (*MODES, "per_rank_time_us", "per_rank_nwrong")}
                     for t in trial_rows]
    def per_rank(field, key):       # each rank's values over the trials
        return zip(*(t[field][key] for t in trial_rows))
    row["per_rank_time_us"] = {key: [median(x) for x in per_rank("per_rank_time_us", key)]
                               for key in first["per_rank_time_us"]}
    row["per_rank_nwrong"] = {key: [None if None in x else sum(x) for x in per_rank("per_rank_nwrong", key)]
                              for key in first["per_rank_nwrong"]}
    for key in MODES:
        if first[key] is None:
            row[key] = None
            continue
        times = spread([t[key]["time_us"] for t in trial_rows])
        t = times["median"]
        alg = algbw(row["bw_bytes"], t / 1e6)
        wrongs = [t[key]["nwrong"] for t in trial_rows]
        busbws = [t[key]["busbw_GBps"] for t in trial_rows]
        row[key] = {"time_us": t, "algbw_GBps": alg, "busbw_GBps": busbw(alg, row["busbw_factor"]),
                    "nwrong": None if all(w is None for w in wrongs) else sum(w or 0 for w in wrongs),
                    "in_flight": first[key].get("in_flight"),
                    "spread": {"trials": len(trial_rows), "time_us_min": times["min"],
                               "time_us_max": times["max"], "cv": times["cv"],
                               "range": times["range"],
                               "busbw_GBps_min": None if None in busbws else min(busbws),
                               "busbw_GBps_max": None if None in busbws else max(busbws)},
                    "unstable": times["range"] > threshold}
    row["unstable_threshold"] = threshold
    return row


class Collector:
    """run --trials on rank 0: each trial's row merged with the same row of the earlier trials."""

    def __init__(self, threshold=UNSTABLE):
        self.threshold = threshold
        self.rows = {}     # rows.key -> (index in results, [that row of each trial])

    def add(self, results, row):
        k = rows.key(row)
        if k not in self.rows:
            self.rows[k] = (len(results), [])
            results.append(None)
        index, seen = self.rows[k]
        seen.append(row)
        results[index] = merge(seen, self.threshold)

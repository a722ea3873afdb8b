"""Figures of repeated timings: nccl-tests' per-iteration report (-I 1), as 2.19.6 computes
it (src/util.cu computeIterStats, writePerIterReport; src/common.cu
ReduceProcessMaxIterTimes: each iteration's time is the slowest rank's, the summary skips
the first -K iterations), and how sure a median of repeated figures is (median_interval)."""
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple


def _percentile_index(n: int, percentile: int) -> int:
    return min(n - 1, (n * percentile + 99) // 100 - 1)


def stats(times: Sequence[float]) -> Dict[str, float]:
    """min, max, avg, p50, p95, p99 and population stdev of times (same unit)."""
    s = sorted(times)
    n = len(s)
    avg = sum(s) / n
    return {"min": s[0], "max": s[-1], "avg": avg, "p50": s[n // 2],
            "p95": s[_percentile_index(n, 95)], "p99": s[_percentile_index(n, 99)],
            "stdev": math.sqrt(sum((x - avg) ** 2 for x in s) / n)}


def spread_pct(times: Sequence[float]) -> float:
    """The spread of per-call times: their population stdev as a share of their mean, in %
    (nccl-tests' cv%)."""
    st = stats(times)
    return st["stdev"] / st["avg"] * 100.0 if st["avg"] > 0 else 0.0


def slowest(per_rank: Sequence[Sequence[float]]) -> List[float]:
    """Each iteration's time: the slowest rank's (per_rank[r][i])."""
    return [max(column) for column in zip(*per_rank)]


def report(per_rank: Sequence[Sequence[float]], skip: int) -> Dict[str, Any]:
    """The per-iteration object of one row and mode from every rank's per-iteration
    seconds (per_rank[r][i]), in nccl-tests' JSON keys (microseconds)."""
    times = slowest(per_rank)
    st = stats(times[skip:])
    out: Dict[str, Any] = {"skipped_iterations": skip}
    out.update({f"{k}_us": v * 1e6 for k, v in st.items()})
    out["cv_pct"] = spread_pct(times[skip:])
    out["times_us"] = [t * 1e6 for t in times]
    out["per_process_max_times_us"] = [[t * 1e6 for t in rank] for rank in per_rank]
    return out


def median_interval(values: Sequence[float],
                    confidence: float) -> Optional[Tuple[float, float, float]]:
    """The sign test's confidence interval of the median of values: (low, high, coverage),
    the order statistics j and n-1-j (0-based) with the largest j whose coverage, 1 - 2 P(B <= j)
    for B ~ Binomial(n, 1/2), is still at least `confidence`. It assumes nothing about the
    distribution (a loaded machine's timings have long tails). None when there are too few
    values for that confidence (fewer than 6 for 95%, 8 for 99%)."""
    s = sorted(values)
    n = len(s)
    best, below = None, 0.0
    for j in range((n + 1) // 2):
        below += math.comb(n, j) / 2 ** n          # P(B <= j)
        if 1 - 2 * below < confidence:
            break
        best = (s[j], s[n - 1 - j], 1 - 2 * below)
    return best

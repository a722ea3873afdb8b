"""Figures of repeated timings: nccl-tests' per-iteration report (-I 1), as 2.19.6 computes
it (src/util.cu computeIterStats, writePerIterReport; src/common.cu
ReduceProcessMaxIterTimes: each iteration's time is the slowest rank's, the summary skips
the first -K iterations), and how sure the centre of repeated figures is (centre_interval)."""
import functools
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
    """nccl-tests' cv%: the population stdev of times as a share of their mean, in %."""
    st = stats(times)
    return st["stdev"] / st["avg"] * 100.0 if st["avg"] > 0 else 0.0


def slowest(per_rank: Sequence[Sequence[float]]) -> List[float]:
    """Each iteration's slowest time over the ranks (per_rank[r][i])."""
    return [max(column) for column in zip(*per_rank)]


def report(per_rank: Sequence[Sequence[float]], skip: int) -> Dict[str, Any]:
    """The per-iteration object of one row and mode in nccl-tests' JSON keys (us), from
    every rank's seconds per_rank[r][i]."""
    times = slowest(per_rank)
    return {"skipped_iterations": skip, **{f"{k}_us": v * 1e6 for k, v in stats(times[skip:]).items()},
            "cv_pct": spread_pct(times[skip:]), "times_us": [t * 1e6 for t in times],
            "per_process_max_times_us": [[t * 1e6 for t in rank] for rank in per_rank]}


def centre_interval(values: Sequence[float], confidence: float) -> Optional[Tuple[float, float, float]]:
    """The Wilcoxon signed-rank interval of the centre of values (taken to be symmetric
    about it, nothing more: a loaded machine's timings have long tails): (low, centre,
    high), the c-th of the n(n+1)/2 averages of two values (one with itself too) from each
    end, c the largest whose coverage 1 - 2 P(T < c) (T: the signed-rank statistic) is at
    least `confidence`, and their median (Hodges-Lehmann's). None when too few values
    (fewer than 6 for 95%, 8 for 99%)."""
    n, below, c = len(values), 0.0, 0
    for p in _signed_ranks(n):          # P(T < c) grows with c
        if 1 - 2 * (below + p) < confidence:
            break
        below, c = below + p, c + 1
    pairs = sorted((values[i] + values[j]) / 2 for i in range(n) for j in range(i, n))
    m = len(pairs)
    return (pairs[c - 1], (pairs[(m - 1) // 2] + pairs[m // 2]) / 2, pairs[m - c]) if c else None


@functools.lru_cache(maxsize=None)      # verify asks again after every pair
def _signed_ranks(n: int) -> List[float]:
    """P(T = t), t up to half the top, of the signed-rank statistic (exact to n = 60)."""
    top = n * (n + 1) // 2
    if n <= 60:
        ways = [1] + [0] * top          # subsets of the ranks 1..n by their sum
        for r in range(1, n + 1):
            for t in range(top, r - 1, -1):
                ways[t] += ways[t - r]
        return [w / 2 ** n for w in ways[:top // 2 + 1]]
    mu, sd = top / 2, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    cdf = [0.5 * math.erfc((mu - t - 0.5) / sd / math.sqrt(2)) for t in range(top // 2 + 1)]
    return [b - a for a, b in zip([0.0] + cdf, cdf)]

"""Faults that come and go (docs/commands/check.md, "Intermittent faults"), without processes:
each call of a measurement is fast (it meets its limit) or slow (it misses the limit by more
than its peers' own scatter); a thing measured more than once is

- persistent: slow calls and none fast (the fault the other verdicts condemn);
- intermittent: slow calls in two measurements or more, and fast calls besides;
- once: slow calls in one measurement only (a passing disturbance, or a fault not yet seen
  twice: a few more calls decide);
- clean: no slow call.

Other work on a shared machine also slows calls, in bursts: a burst slows one measurement,
a flapping link every measurement that overlaps its slow phase, which is why one
measurement with slow calls never makes an intermittent fault.
"""
from statistics import median
from typing import Any, Dict, List, Optional, Sequence

from ..measure.iterstats import spread_pct
from . import tomography

UPPER = 0.9         # a measurement's own scatter: its calls' 90th percentile over their median
EPISODES = 2        # measurements with slow calls an intermittent fault needs
# The least noise a call must exceed the limit by to be slow, whatever the peers measured:
# calls inside a host (and the whole job's, which include them) are CPU-bound, and on a
# shared machine healthy hosts alone had calls 1.45 times the limit's time in every one of
# three measurements; a path's are bound by its links.
FLOOR = {"pair": 0.25, "intra": 1.0, "job": 1.0}


def scatter(times: Sequence[float]) -> float:
    """How far a measurement's slower calls lie above its median: p90 / median - 1 (>= 0)."""
    s = sorted(times)
    if not s:
        return 0.0
    mid = median(s)
    return max(0.0, s[min(len(s) - 1, int(UPPER * len(s)))] / mid - 1) if mid > 0 else 0.0


def noise(peers: Sequence[Sequence[float]], test: str) -> float:
    """The peers' measured noise: the median scatter of their measurements, at least the
    test's FLOOR."""
    return max(FLOOR[test], median(scatter(t) for t in peers) if peers else 0.0)


def calls(times: Sequence[float], limit_s: Optional[float], peer_noise: float) -> Dict[str, Any]:
    """{slow, fast, calls, slow_s}: calls over limit_s x (1 + peer_noise) are slow (slow_s:
    their seconds), calls within limit_s fast (between the two: neither, within the peers'
    noise). No limit: every call fast."""
    if limit_s is None:
        return {"slow": 0, "fast": len(times), "calls": len(times), "slow_s": []}
    slow = [t for t in times if t > limit_s * (1 + peer_noise)]
    return {"slow": len(slow), "fast": sum(1 for t in times if t <= limit_s),
            "calls": len(times), "slow_s": slow}


def classify(measured: Sequence[Dict[str, Any]]) -> str:
    """persistent, intermittent, once or clean, from calls() of each measurement of one thing."""
    slow = sum(m["slow"] for m in measured)
    fast = sum(m["fast"] for m in measured)
    episodes = sum(1 for m in measured if m["slow"])
    if not slow:
        return "clean"
    if not fast:            # no call met the limit: a lasting fault, whatever its scatter
        return "persistent"
    return "intermittent" if episodes >= EPISODES and fast else "once"


def record(what: str, kind: str, series: Sequence[Sequence[float]],
           measured: Sequence[Dict[str, Any]], noise_pct: float, bw_bytes: float,
           limit: Dict[str, Any]) -> Dict[str, Any]:
    """The JSON record of an intermittent fault from its measurements' per-call seconds and
    calls() of each: failed k of m calls, in how many measurements, the figures (GB/s) of its
    slow calls and of the others, its slowest and fastest call, the spread of its calls."""
    every = [t for times in series for t in times]
    slow = [t for m in measured for t in m["slow_s"]]
    rest = list(every)
    for t in slow:
        rest.remove(t)

    def gbps(ts: List[float]) -> Optional[float]:
        return bw_bytes / median(ts) / 1e9 if ts else None
    return {"what": what, "kind": kind, "failed": len(slow), "of": len(every),
            "measurements": len(series), "with_slow_calls": sum(1 for m in measured if m["slow"]),
            "slow_GBps": gbps(slow), "fast_GBps": gbps(rest),
            "slowest_GBps": bw_bytes / max(every) / 1e9 if every else None,
            "fastest_GBps": bw_bytes / min(every) / 1e9 if every else None,
            "spread_pct": spread_pct(every) if every else None,
            "noise_pct": noise_pct, "threshold": limit}


def limit_seconds(limit: Optional[Dict[str, Any]], bw_bytes: float) -> Optional[float]:
    """The time per call at a test's limits (the tighter of its busbw and time limits)."""
    if not limit:
        return None
    out = [bw_bytes / (limit["min_busbw_GBps"] * 1e9)] if limit.get("min_busbw_GBps") else []
    out += [limit["max_latency_us"] / 1e6] if limit.get("max_latency_us") else []
    return min(out) if out else None


def blame(paths: Dict[Any, List[Dict[str, Any]]], links_of) -> Dict[str, Any]:
    """Which links explain the slow calls of paths {path: [calls() per measurement]} (links_of
    (path): its links): the greedy cover of tomography over the measurements with slow calls,
    no link cleared by fast ones (a flapping link is fast half the time). {named: [link],
    ties: [[link, ...]], by: {link: [(path, measurement index)]}}."""
    items = [(p, i) for p, ms in paths.items() for i, m in enumerate(ms) if m["slow"]]
    cands = [list(links_of(p)) for p, _ in items]
    cover: Dict[Any, List[int]] = {}
    for k, c in enumerate(cands):
        for x in c:
            cover.setdefault(x, []).append(k)
    named, ties = tomography.greedy(cands, cover, {x: k for k, x in enumerate(cover)})
    return {"named": named, "ties": ties,
            "by": {x: [items[k] for k in cover[x]] for x in named + [y for t in ties for y in t]}}

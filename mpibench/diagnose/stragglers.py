"""Who is slow: per-host figures and stragglers from every rank's per-iteration times. A
rank or host is slow only when, in at least `consistency` of the iterations (each its own
measurement), it is over that iteration's median by more than `margin` and than its peers
scatter; never with two (nothing says which is off) nor where half or more would be.
Sink takes the engine's figures on rank 0 to the results output, each per-host probe
through this analysis first.
"""
from statistics import median
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence, TypeVar

from ..results.schema import HostAnalysis, HostFigures, RankFigures

if TYPE_CHECKING:
    from ..results.output import RunOutput

UPPER = 0.9         # a peer's scatter: this quantile of its per-iteration ratios
Name = TypeVar("Name", int, str)      # a rank or a host


def analyze(hosts: Sequence[str], times: Sequence[Sequence[float]], margin: float = 0.2,
            consistency: float = 0.8) -> HostAnalysis:
    """hosts[r]: host of rank r; times[r][k]: seconds of rank r in iteration k."""
    n = len(times)
    iters = min(len(t) for t in times) if times else 0
    by_rank = {r: times[r][:iters] for r in range(n)}
    rank_med = [median(t) for t in by_rank.values()]
    mid = median(rank_med)
    members = {h: [r for r in range(n) if hosts[r] == h] for h in dict.fromkeys(hosts)}
    host_iter = _host_iterations(times, members, iters)
    per_rank, per_host = _judge(by_rank, margin, consistency), _judge(host_iter, margin, consistency)
    return {
        "iterations": iters, "margin": margin, "consistency": consistency,
        "ranks": _rank_figures(hosts, rank_med, per_rank),
        "median_rank_s": mid,
        "slowest": _slowest_rank(hosts, rank_med, mid),
        "hosts": _host_figures(members, rank_med, per_host),
        "slow_hosts": [h for h, v in per_host.items() if v["slow"]],
        "slow_ranks": [r for r in range(n) if per_rank[r]["slow"]],
        # the ranks' pair only on one host: else the hosts' pair says it
        "pairs": _pair("host", host_iter, margin, consistency)
        + (_pair("rank", by_rank, margin, consistency) if len(members) == 1 else [])}


def _host_iterations(times: Sequence[Sequence[float]], members: Mapping[str, List[int]], iters: int
                     ) -> Dict[str, List[float]]:
    """{host: each iteration's time of its slowest rank}."""
    return {h: [max(times[r][k] for r in rs) for k in range(iters)] for h, rs in members.items()}


def _slowest_rank(hosts: Sequence[str], rank_med: Sequence[float], mid: float) -> Dict[str, Any]:
    """The slowest rank: its rank, host, median and ratio to the median rank."""
    slowest = max(range(len(rank_med)), key=lambda r: rank_med[r])
    return {"rank": slowest, "host": hosts[slowest], "median_s": rank_med[slowest],
            "ratio": rank_med[slowest] / mid if mid > 0 else None}


def _rank_figures(hosts: Sequence[str], rank_med: Sequence[float],
                  per_rank: Mapping[int, Mapping[str, Any]]) -> List[RankFigures]:
    """Each rank's median, slow iterations and threshold."""
    return [{"rank": r, "host": hosts[r], "median_s": rank_med[r],
             "slow_iterations": per_rank[r]["slow_iterations"],
             "threshold": per_rank[r]["threshold"]} for r in range(len(rank_med))]


def _host_figures(members: Mapping[str, List[int]], rank_med: Sequence[float],
                  per_host: Mapping[str, Mapping[str, Any]]) -> List[HostFigures]:
    """Each host's ranks' medians (fastest, median, slowest), its slowest rank and its verdict."""
    meds = {h: [rank_med[r] for r in rs] for h, rs in members.items()}
    return [{"host": h, "ranks": members[h], "min_s": min(meds[h]), "median_s": median(meds[h]),
             "max_s": max(meds[h]), "slowest_rank": max(members[h], key=lambda r: rank_med[r]),
             "ratio": v["ratio"], "slow_iterations": v["slow_iterations"],
             "threshold": v["threshold"]} for h, v in per_host.items()]


def _judge(series: Mapping[Name, Sequence[float]], margin: float, consistency: float
           ) -> Dict[Name, Dict[str, Any]]:
    """Each of series {name: seconds per iteration} against each iteration's median and its peers' scatter."""
    names = list(series)
    iters = len(series[names[0]]) if names else 0
    mid = [median(series[x][k] for x in names) for k in range(iters)]
    ratios = {x: sorted(t / m for t, m in zip(series[x], mid) if m > 0) for x in names}
    upper = {x: r[min(len(r) - 1, int(UPPER * len(r)))] if r else None for x, r in ratios.items()}
    out = {}
    for x in names:
        peers = [u for y, u in upper.items() if y != x and u is not None]
        floor = max(margin, (median(peers) - 1) if peers else 0.0)
        out[x] = dict(consistently_slow(series[x], mid, floor, consistency), threshold=1 + floor)
    # Half or more "slow" is two groups around a median between them: which is slow, the
    # median cannot say (2 hosts x 2 ranks: each host's ranks against the other's).
    slow = [x for x in names if out[x]["slow"]]
    for x in names:
        out[x]["slow"] = x in slow and len(names) >= 3 and 2 * len(slow) < len(names)
    return out


def _pair(what: str, series: Mapping[Name, Sequence[float]], margin: float, consistency: float
          ) -> List[Dict[str, Any]]:
    """[the one of exactly two members consistently slower than the other] (else [])."""
    if len(series) != 2:
        return []
    a, b = sorted(series, key=lambda x: median(series[x]))
    v = consistently_slow(series[b], series[a], margin, consistency)
    return [{"what": what, "slower": b, "faster": a, "ratio": v["ratio"],
             "slow_iterations": v["slow_iterations"]}] if v["slow"] else []


def consistently_slow(times: Sequence[float], reference: Sequence[float], margin: float,
                      consistency: float) -> Dict[str, Any]:
    """Slow when times[k] is over (1 + margin) x reference[k] in `consistency` of them."""
    ratios = [t / ref for t, ref in zip(times, reference) if ref > 0]
    slow = sum(1 for x in ratios if x > 1 + margin)
    return {"ratio": median(ratios) if ratios else None, "slow_iterations": slow,
            "slow": bool(times) and slow >= consistency * len(times)}


class Sink:
    def __init__(self, out: "RunOutput", hosts: Sequence[str]) -> None:
        self.out = out          # a results.output.RunOutput
        self.hosts = hosts      # host of every rank

    def __getattr__(self, name: str) -> Any:        # set, table_header, add_row: the output's own
        return getattr(self.out, name)

    def add_probe(self, times: List[List[float]], margin: float,
                  **what: Any) -> None:     # what was probed: coll, dt, op, size, c, mode
        self.out.add_hosts(analyze(self.hosts, times, margin=margin), **what)

"""Pairs of ranks, without communication: who meets whom in which round, each pair's time
per iteration (the slower of its two ends), which pairs and hosts are slow."""
from statistics import median
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ..measure.iterstats import slowest
from . import stragglers


def participants(hosts: Sequence[str], every_rank: bool = False) -> List[int]:
    """Ranks that take part: the lowest rank on each host, or every rank."""
    if every_rank:
        return list(range(len(hosts)))
    first: Dict[str, int] = {}
    for r, h in enumerate(hosts):
        first.setdefault(h, r)
    return list(first.values())


def round_robin(items: Iterable[int]) -> List[List[Tuple[int, int]]]:
    """Every pair of items once, in rounds where no item is in two pairs (circle method)."""
    seats: List[Optional[int]] = list(items)
    if len(seats) < 2:
        return []
    if len(seats) % 2:
        seats.append(None)                       # the bye
    n, rounds, ring = len(seats), [], seats[1:]
    for _ in range(n - 1):
        line = [seats[0]] + ring
        pairs = [(line[i], line[n - 1 - i]) for i in range(n // 2)]
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        ring = ring[-1:] + ring[:-1]
    return rounds


def schedule(ranks: Iterable[int], hosts: Sequence[str]) -> List[List[Tuple[int, int]]]:
    """round_robin's rounds, each split greedily so that no host is in two pairs at once."""
    out: List[List[Tuple[int, int]]] = []
    for rnd in round_robin(ranks):
        subs: List[Tuple[Set[str], List[Tuple[int, int]]]] = []
        for a, b in rnd:
            busy = {hosts[a], hosts[b]}
            for sub in subs:
                if not busy & sub[0]:
                    sub[0].update(busy)
                    sub[1].append((a, b))
                    break
            else:
                subs.append((set(busy), [(a, b)]))
        out.extend(pairs for _, pairs in subs)
    return out


def slower_end(gathered: Iterable[Iterable[Mapping[str, Any]]]) -> Dict[Tuple[int, int], List[float]]:
    """{(from, to): seconds per iteration, the slower end's} from PairBench.run_round records."""
    ends: Dict[Tuple[int, int], List[List[float]]] = {}
    for records in gathered:
        for rec in records:
            ends.setdefault((rec["from"], rec["to"]), []).append(rec["times"])
    return {key: slowest(series) for key, series in ends.items()}


_Links = Mapping[Tuple[int, int], Sequence[float]]


def analyze(labels: Sequence[str], links: _Links, threshold: float = 0.8,
            consistency: float = 0.8) -> Dict[str, Any]:
    """Slow links and hosts from links {(i, j): [seconds per iteration]}, labels[i] i's host: a
    host whose links are below `threshold` x the others, a link below `threshold` x the median
    link of hosts not slow, in `consistency` of the iterations (stragglers.consistently_slow)."""
    margin = 1 / threshold - 1          # bandwidth below threshold x ref = time above (1+margin) x ref
    keys = sorted(links)
    iters = min((len(links[k]) for k in keys), default=0)
    out: Dict[str, Any] = {"threshold": threshold, "consistency": consistency, "iterations": iters,
           "slow_hosts": [], "slow_links": [], "hosts": [], "links": [], "note": None}
    if not keys or not iters:
        return out

    names = list(dict.fromkeys(labels[i] for i in sorted({i for k in keys for i in k})))
    _judge_hosts(labels, links, keys, iters, names, margin, consistency, out)
    out["note"] = _hosts_note(len(names))
    _judge_links(labels, links, keys, iters, margin, consistency, out)
    return out


def _per_iter_median(links: _Links, selected: Sequence[Tuple[int, int]], iters: int) -> List[float]:
    """The median of the selected links' times, iteration by iteration."""
    return [median(links[k][t] for k in selected) for t in range(iters)]


def _with_host(labels: Sequence[str], h: str, k: Tuple[int, int]) -> bool:
    """Whether host h is at one end of link k."""
    return h in (labels[k[0]], labels[k[1]])


def _judge_hosts(labels: Sequence[str], links: _Links, keys: Sequence[Tuple[int, int]], iters: int,
                 names: Sequence[str], margin: float, consistency: float, out: Dict[str, Any]) -> None:
    """Each host's entry in out["hosts"], the slow ones in out["slow_hosts"]."""
    for h in names:
        mine = [k for k in keys if _with_host(labels, h, k)]
        others = [k for k in keys if not _with_host(labels, h, k)]
        entry: Dict[str, Any] = {"host": h, "links": len(mine), "ratio": None, "slow_iterations": 0}
        if mine and others:
            verdict = stragglers.consistently_slow(_per_iter_median(links, mine, iters),
                                                   _per_iter_median(links, others, iters),
                                                   margin, consistency)
            entry.update(ratio=verdict["ratio"], slow_iterations=verdict["slow_iterations"])
            if verdict["slow"]:
                out["slow_hosts"].append(h)
        out["hosts"].append(entry)


def _hosts_note(hosts: int) -> Optional[str]:
    """What so few hosts can't tell, or None."""
    if hosts == 2:
        return ("with two hosts every link joins both: a slow link cannot be "
                "blamed on one of them (use three or more hosts)")
    if hosts < 2:
        return "one host: links between its ranks only"
    return None


def _judge_links(labels: Sequence[str], links: _Links, keys: Sequence[Tuple[int, int]], iters: int,
                 margin: float, consistency: float, out: Dict[str, Any]) -> None:
    """The reference time, each link's entry in out["links"], the slow ones in out["slow_links"]."""
    healthy = [k for k in keys if not any(_with_host(labels, h, k) for h in out["slow_hosts"])] or keys
    ref = _per_iter_median(links, healthy, iters)
    out["reference_s"] = median(ref)
    for k in keys:
        verdict = stragglers.consistently_slow(links[k][:iters], ref, margin, consistency)
        out["links"].append({"from": k[0], "to": k[1], "median_s": median(links[k][:iters]),
                             "ratio": verdict["ratio"], "slow_iterations": verdict["slow_iterations"]})
        if verdict["slow"] and len(keys) > 1:
            out["slow_links"].append(k)

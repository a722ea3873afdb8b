"""Which links explain the failed paths (network tomography, docs/fabric.md "The verdict"):
the smallest set of links on failed paths and on no passed one, found greedily, with ties;
thin and once links fabricplan tests again. O(hosts x rails log) per verdict."""
import heapq
from collections import Counter
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Literal, Optional, Sequence, Set, Tuple, Union

if TYPE_CHECKING:
    from .topology import Switch, Topology

Nic = Tuple[Literal["nic"], int, int]                           # a host's link to its leaf: host index, rail
Uplink = Tuple[Literal["up"], Optional[str], Optional[str]]    # a switch's link to the one above
RailSwitch = Tuple[Literal["rail"], int]
Link = Union[Nic, Uplink, RailSwitch]
Path = Tuple[int, int, int]         # hosts a and b, the rail
Result = Tuple[int, int, int, bool]     # a path tested: hosts a and b, the rail, passed


def nic(host: int, rail: int) -> Nic:
    return ("nic", host, rail)


def uplink(switch: Optional[str], parent: Optional[str]) -> Uplink:
    return ("up", switch, parent)


def rail_switch(rail: int) -> RailSwitch:
    return ("rail", rail)


class Fabric:
    """Hosts 0..n-1 (names[i]) with `rails` rails each, under a topology (topology.py)."""

    def __init__(self, names: Iterable[str], rails: int, topo: "Topology",
                 nics: Optional[Dict[Tuple[int, int], str]] = None) -> None:
        self.names = list(names)
        self.n, self.rails, self.topo = len(self.names), rails, topo
        self.leaf = [topo.leaf[h] for h in self.names]
        self.nics = nics or {}          # {(host index, rail): "eth1" / "mlx5_1"} where known
        self._ups: Dict[Tuple["Switch", "Switch"], List[Uplink]] = {}

    def uplinks(self, a: int, b: int) -> List[Uplink]:
        key = (self.leaf[a], self.leaf[b])
        if key not in self._ups:        # [] on one leaf
            self._ups[key] = [uplink(s, p) for s, p in self.topo.uplinks_between(*key)]
        return self._ups[key]

    def path(self, a: int, b: int, r: int) -> List[Link]:
        return [nic(a, r), nic(b, r)] + self.uplinks(a, b) + ([rail_switch(r)] if self.rails > 1 else [])

    def name(self, link: Link) -> str:
        """'h3 rail 1 (eth1, its link to leaf1)', 'uplink leaf2-spine1', 'rail 3 switch'."""
        if link[0] == "nic":
            _, h, r = link
            extra = [x for x in (self.nics.get((h, r)),
                                 f"its link to {self.leaf[h]}" if self.leaf[h] else None) if x]
            return f"{self.names[h]} rail {r}" + (f" ({', '.join(extra)})" if extra else "")
        if link[0] == "up":
            return f"uplink {link[1]}-{link[2]}"
        return f"rail {link[1]} switch (slow on every host's rail {link[1]})"


def localise(fabric: Fabric, results: Iterable[Result]) -> Dict[str, Any]:
    """The verdict on every path tested so far, results [(a, b, rail, passed)]: links named, tied,
    unproven (only on failed paths, not needed), thin, good; paths (a, b, rail) unexplained,
    transient (failed, then passed), once (a named link's one failure); the failed hosts."""
    good, failed, passed = _sort_results(fabric, results)
    named, ties, unexplained, thin = _explain(failed, good)
    # links on failed paths, never on a passed one, that the verdict did not need: a bad
    # partner on each of their paths hid them (worth a deciding pair)
    settled = set(named) | {x for t in ties for x in t}
    unproven = _unproven(failed, good, settled)
    unexplained = list(dict.fromkeys(unexplained))            # a path retested: once
    transient = [p for p in unexplained if p in passed]      # failed once, passed again
    unexplained = [p for p in unexplained if p not in passed]
    once = _once(failed, settled)
    return {"named": named, "ties": ties, "unexplained": unexplained, "good": good,
            "unproven": unproven, "transient": transient, "thin": thin, "once": once,
            "failed_hosts": _failed_hosts(fabric, named), "any_passed": bool(good)}


def _sort_results(fabric: Fabric, results: Iterable[Result]
                  ) -> Tuple[Set[Link], List[Tuple[Path, List[Link]]], Set[Path]]:
    """(links of passed paths, failed paths with their links, passed paths)."""
    good: Set[Link] = set()                     # links of passed paths, failed paths' links
    failed: List[Tuple[Path, List[Link]]] = []
    passed: Set[Path] = set()
    for a, b, r, ok in results:
        links = fabric.path(a, b, r)
        if ok:
            good.update(links)
            passed.add((a, b, r))
        else:
            failed.append(((a, b, r), links))
    return good, failed, passed


def _explain(failed: Sequence[Tuple[Path, List[Link]]], good: Set[Link]
             ) -> Tuple[List[Link], List[List[Link]], List[Path], List[Link]]:
    """(named, ties, unexplained, thin): the links that explain the failed paths."""
    if not good:       # nothing to compare with: every host's link on a failed path is suspect
        suspects: List[Link] = list(dict.fromkeys(x for _, links in failed for x in links
                                                  if x[0] == "nic"))
        return suspects, [], [], []
    cands, cover, order, unexplained = _candidates(failed, good)
    named, ties = _greedy(cands, cover, order)
    return named, ties, unexplained, _thin(named, cands, cover)


def _thin(named: Sequence[Link], cands: Sequence[Sequence[Link]], cover: Dict[Link, List[int]]
          ) -> List[Link]:
    """Named links one failed path alone accuses."""
    # thin: a named link one failed path alone accuses (its other failed paths hold another
    # named link): a healthy host whose one good partner a passing disturbance slowed
    named_set = set(named)
    return [x for x in named if sum(not any(y != x and y in named_set for y in cands[i])
                                    for i in cover[x]) == 1]


def _unproven(failed: Sequence[Tuple[Path, List[Link]]], good: Set[Link], settled: Set[Link]
              ) -> List[Link]:
    """Links on failed paths, on no passed one, that the verdict did not settle."""
    return list(dict.fromkeys(x for _, links in failed for x in links
                              if x not in good and x not in settled)) if good else []


def _once(failed: Sequence[Tuple[Path, List[Link]]], settled: Set[Link]) -> List[Path]:
    """The failed paths that are a settled link's one failure."""
    count = Counter(x for _, links in failed for x in links)      # once: a settled link's one failure
    return list(dict.fromkeys(p for p, links in failed
                              if any(count[x] == 1 for x in links if x in settled)))


def _candidates(failed: Sequence[Tuple[Path, List[Link]]], good: Set[Link]
                ) -> Tuple[List[List[Link]], Dict[Link, List[int]], Dict[Link, int], List[Path]]:
    """(each failed path's unproven links, {link: its failed paths}, {link: order met}, paths with none)."""
    cands = [[x for x in links if x not in good] for _, links in failed]
    cover: Dict[Link, List[int]] = {}
    for i, c in enumerate(cands):
        for x in c:
            cover.setdefault(x, []).append(i)
    unexplained = [p for (p, _), c in zip(failed, cands) if not c]
    return cands, cover, {x: k for k, x in enumerate(cover)}, unexplained


def _greedy(cands: Sequence[Sequence[Link]], cover: Dict[Link, List[int]], order: Dict[Link, int]
            ) -> Tuple[List[Link], List[List[Link]]]:
    """(named, ties): the link on the most unexplained failed paths first; two on the same, a tie."""
    named, ties = [], []
    covered = [not c for c in cands]
    heap = [(-len(v), order[x], x) for x, v in cover.items()]
    heapq.heapify(heap)
    done = set()
    while heap:
        neg, _, x = heapq.heappop(heap)
        if x in done:
            continue
        live = [i for i in cover[x] if not covered[i]]
        if not live:
            continue
        if len(live) != -neg:                 # stale count: put it back where it belongs
            heapq.heappush(heap, (-len(live), order[x], x))
            continue
        twins = [y for y in cands[live[0]] if y != x and y not in done
                 and {i for i in cover[y] if not covered[i]} == set(live)]
        for i in live:
            covered[i] = True
        done.update([x] + twins)
        if twins:
            ties.append([x] + twins)
        else:
            named.append(x)
    return named, ties


def _failed_hosts(fabric: Fabric, named: Sequence[Link]) -> List[int]:
    """The hosts with every rail named (rails whose switch is named left aside)."""
    rails = Counter(x[1] for x in named if x[0] == "nic")      # a link is named once
    # a rail whose switch is named says nothing of the hosts' links on it
    known = fabric.rails - sum(1 for x in named if x[0] == "rail")
    return sorted(h for h, n in rails.items() if n >= max(1, known))

"""Which host pairs `check` tests in each round (every rail of a pair, every pair of a
round at once), so that tomography.py can name the bad link, rail or uplink: at most four
rounds, each planned in O(hosts x rails), as docs/fabric.md ("The rounds") says why.
"""
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from . import tomography
from .pairs import round_robin
from .tomography import Fabric, Link, Uplink

MAX_ROUNDS = 4
TRIES = 4          # hosts tried per leaf for an uplink's deciding pair
HostPair = Tuple[int, int]          # host indices, the lower first


def _pair(a: int, b: int) -> HostPair:
    """a and b, the lower first."""
    return (a, b) if a <= b else (b, a)


def _leaves(fabric: Fabric) -> Dict[Optional[str], List[int]]:
    """{leaf: [host, ...]}, leaves and hosts in job order."""
    by: Dict[Optional[str], List[int]] = {}
    for h, leaf in enumerate(fabric.leaf):
        by.setdefault(leaf, []).append(h)
    return by


def _pair_leftovers(left: List[int], avoid: Collection[HostPair], fabric: Fabric) -> List[HostPair]:
    """Pairs of left-over hosts not in avoid: halves against each other across leaves, then greedily."""
    m = len(left) // 2
    pairs: List[HostPair] = []
    rest: List[int] = []
    for a, b in zip(left[:m], left[m:2 * m]):
        p = _pair(a, b)
        if p in avoid or fabric.leaf[a] == fabric.leaf[b]:
            rest += [a, b]
        else:
            pairs.append(p)
    rest += left[2 * m:]
    while len(rest) > 1:
        a = rest.pop(0)
        ok = [b for b in rest if _pair(a, b) not in avoid]
        ok = [b for b in ok if fabric.leaf[b] != fabric.leaf[a]] or ok
        if ok:
            rest.remove(ok[0])
            pairs.append(_pair(a, ok[0]))
    return pairs


def first_rounds(fabric: Fabric) -> List[List[HostPair]]:
    """Rounds 1 and 2: [[(a, b), ...], [(a, b), ...]] over host indices."""
    leaves = list(_leaves(fabric).values())
    one = _round_one(leaves, fabric)
    seen = set(one)
    if len(leaves) == 1:
        two = _round_two_one_leaf(leaves[0], seen)
    else:
        two = _round_two_across_leaves(leaves, seen, fabric)
    return [r for r in (one, two) if r]


def _round_one(leaves: Sequence[Sequence[int]], fabric: Fabric) -> List[HostPair]:
    """Round 1: neighbours on each leaf, then the leaves' odd hosts paired."""
    one = [(hosts[i], hosts[i + 1]) for hosts in leaves for i in range(0, len(hosts) - 1, 2)]
    one += _pair_leftovers([hosts[-1] for hosts in leaves if len(hosts) % 2], set(), fabric)
    return one


def _round_two_one_leaf(hosts: Sequence[int], seen: Collection[HostPair]) -> List[HostPair]:
    """Round 2 on one leaf: each host with its other neighbour (round 1 shifted by one)."""
    n = len(hosts)
    two = [_pair(hosts[i], hosts[(i + 1) % n]) for i in range(1, n - (n % 2), 2)]
    return [p for p in two if p not in seen and p[0] != p[1]]


def _round_two_across_leaves(leaves: Sequence[Sequence[int]], seen: Collection[HostPair], fabric: Fabric
                             ) -> List[HostPair]:
    """Round 2 over several leaves: the j-th hosts of leaves the circle pairs, then the rest."""
    two, busy = _leaf_circle_pairs(leaves, seen)
    left = [h for hosts in leaves for h in hosts if h not in busy]
    two += _pair_leftovers(left, seen, fabric)
    return two


def _leaf_circle_pairs(leaves: Sequence[Sequence[int]], seen: Collection[HostPair]
                       ) -> Tuple[List[HostPair], Set[int]]:
    """(pairs of the j-th hosts of the leaves round_robin pairs in its round j, the hosts in them)."""
    circle = round_robin(range(len(leaves)))
    busy: Set[int] = set()
    two = []
    for j in range(max(len(h) for h in leaves)):
        for la, lb in circle[j % len(circle)]:
            if j < len(leaves[la]) and j < len(leaves[lb]):
                p = _pair(leaves[la][j], leaves[lb][j])
                if p not in seen:
                    two.append(p)
                    busy.update(p)
    return two, busy


def _decisive(fabric: Fabric, good: Set[Link], a: int, b: int, target: Link) -> List[int]:
    """The rails on which path a-b has target as its only link not proven good."""
    return [r for r in range(fabric.rails) if set(fabric.path(a, b, r)) - good == {target}]


def _pair_for_nic(fabric: Fabric, good: Set[Link], host: int, rail: int, busy: Collection[int],
                  by_leaf: Mapping[Optional[str], Sequence[int]], tested: Collection[HostPair]
                  ) -> Optional[HostPair]:
    """host and a free host proven good on the rail, the path between them deciding."""
    target = tomography.nic(host, rail)
    if fabric.rails > 1 and tomography.rail_switch(rail) not in good:
        return None                    # nothing on this rail is proven: no path can decide
    for pool in (by_leaf[fabric.leaf[host]], range(fabric.n)):
        for b in pool:
            if b != host and b not in busy and _pair(host, b) not in tested \
                    and tomography.nic(b, rail) in good and _decisive(fabric, good, host, b, target):
                return _pair(host, b)
    return None


def _pair_for_uplink(fabric: Fabric, good: Set[Link], target: Uplink, busy: Collection[int],
                     by_leaf: Mapping[Optional[str], Sequence[int]]) -> Optional[HostPair]:
    """Free hosts under and outside the uplink's switch, the path between them deciding."""
    switch = target[1]
    inside = [hs for leaf, hs in by_leaf.items() if switch in fabric.topo.up(leaf)]
    outside = [hs for leaf, hs in by_leaf.items() if switch not in fabric.topo.up(leaf)]
    for hs in inside:
        for a in [h for h in hs if h not in busy][:TRIES]:
            for hs2 in outside:
                for b in [h for h in hs2 if h not in busy][:TRIES]:
                    if _decisive(fabric, good, a, b, target):
                        return _pair(a, b)
    return None


def deciding_pairs(fabric: Fabric, verdict: Mapping[str, Any], tested: Collection[HostPair]
                   ) -> Tuple[List[HostPair], Dict[Link, Optional[HostPair]]]:
    """(pairs, {link: pair or None}): per tied, unproven or thin link, a path with it the only unproven."""
    good = verdict["good"]
    by_leaf = _leaves(fabric)
    mate: Dict[int, HostPair] = {}
    pairs: List[HostPair] = []
    chosen: Dict[Link, Optional[HostPair]] = {}
    for link in [x for tie in verdict["ties"] for x in tie] + verdict["unproven"] + verdict["thin"]:
        if link[0] == "nic" and link[1] in mate:         # its host is in a pair already
            found = mate[link[1]] if _decisive(fabric, good, *mate[link[1]], link) else None
        elif link[0] == "nic":
            found = _pair_for_nic(fabric, good, link[1], link[2], mate, by_leaf, tested)
        else:
            found = _pair_for_uplink(fabric, good, link, mate, by_leaf) if link[0] == "up" else None
        if found and found[0] not in mate and found not in tested:
            pairs.append(found)
            mate[found[0]] = mate[found[1]] = found
        chosen[link] = found
    return pairs, chosen


class FabricRounds:
    """The rounds: next_round() gives host pairs, record() takes {(a, b): [passed per rail]}."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric, self.plan = fabric, first_rounds(fabric)
        self.results: List[tomography.Result] = []
        self.rounds: List[List[HostPair]] = []
        self.tested: Set[HostPair] = set()
        self.retested: Set[HostPair] = set()
        self.deciders: Dict[Link, Optional[HostPair]] = {}
        self._verdict: Optional[Dict[str, Any]] = None

    def next_round(self) -> List[HostPair]:
        k = len(self.rounds)
        if k < len(self.plan):
            pairs = self.plan[k]
        elif k >= MAX_ROUNDS:
            pairs = []
        else:
            v = self.verdict()
            pairs, chosen = deciding_pairs(self.fabric, v, self.tested) if v["any_passed"] else ([], {})
            for link, pair in chosen.items():
                self.deciders.setdefault(link, pair)
            # a failed path whose every link passed elsewhere: tested once more, to tell
            # a lasting fault between the two from a passing disturbance
            busy = {h for p in pairs for h in p}
            for a, b, _ in v["unexplained"] + v["once"]:
                if (a, b) not in self.retested and a not in busy and b not in busy:
                    pairs.append((a, b))
                    busy.update((a, b))
                    self.retested.add((a, b))
        if pairs:
            self.rounds.append(pairs)
            self.tested.update(pairs)
        return pairs

    def record(self, results: Mapping[HostPair, Sequence[bool]]) -> None:
        self.results += [(a, b, r, ok) for (a, b), oks in results.items() for r, ok in enumerate(oks)]
        self._verdict = None

    def verdict(self) -> Dict[str, Any]:
        if self._verdict is None:
            v = tomography.localise(self.fabric, self.results)
            self._verdict = dict(v, rounds=len(self.rounds), deciders={
                link: self.deciders.get(link) for tie in v["ties"] for link in tie})
        return self._verdict


def run(fabric: Fabric, judge: Callable[[List[HostPair]], Mapping[HostPair, Sequence[bool]]]
        ) -> Dict[str, Any]:
    """Drive FabricRounds with judge(pairs) -> {(a, b): [passed per rail]}; the verdict."""
    rounds = FabricRounds(fabric)
    while pairs := rounds.next_round():
        rounds.record(judge(pairs))
    return rounds.verdict()

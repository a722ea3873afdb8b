"""One collective's rows at a target count: the fit's figure (scaling.py), its interval widened
for what the inputs cannot rule out there (bands.py), the held-out check of the largest input
and, where that check finds a change of regime, the prediction from the largest input alone.
`predict` prints these rows; bench/predict_calibrate.py scores them."""
from math import exp, log, log2
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..measure.collectives import REGISTRY
from ..measure.dtypes import DTYPES
from . import bands, scaling

Point = Tuple[int, int, int, int, float]        # ranks, ranks per host, requested size, S, seconds


class Row(NamedTuple):
    key: int                 # the requested size
    s: float                 # nccl-tests' byte count at the target
    t: float
    lo: float
    hi: float
    cand: Tuple[str, ...]
    why: Optional[str]       # None: predicted; else why not (the row is marked *)
    parts: bands.Parts
    flat: Optional[float] = None     # the baselines: the largest input's bus bandwidth held,
    trend: Optional[float] = None    # log time over log count carried on


class Check(NamedTuple):
    """The largest input predicted from the others: median |log error|, the refit's rms (log),
    rows compared, of them inside their interval or declined, the median |error| (share)."""
    held: int
    miss: float
    rms: float
    rows: int
    held_ok: int
    error: float


def match(size: int, n: int, keys: Sequence[int]) -> int:
    """The requested size a row of `size` bytes at n ranks stands for: nccl-tests rounds each
    rank's share down to elements, then 16 B, so the key is < (16 + element) x n B above it
    (32 x n covers every type)."""
    return min((k for k in keys if 0 <= k - size < 32 * n), key=lambda k: k - size, default=size)


def table(pts: Sequence[Point]) -> Dict[int, Dict[int, Tuple[float, float]]]:
    """{requested size: {ranks: (S, seconds)}}, sizes matched to the smallest count's."""
    first = min(n for n, *_ in pts)
    keys = sorted({k for n, _, k, _, _ in pts if n == first})
    out: Dict[int, Dict[int, Tuple[float, float]]] = {}
    for n, _, size, s, t in pts:
        out.setdefault(match(size, n, keys), {})[n] = (s, t)
    return out


def target_bytes(coll: str, dtype: str, key: int, n: int) -> float:
    """S at n ranks for a requested size: nccl-tests' rounding of each rank's share."""
    model = REGISTRY.get(coll)
    el = DTYPES[dtype].size if dtype in DTYPES else 4
    return model.bw_bytes(model.counts(key // el, el, n), el, n) if model else key


def bus_bytes(coll: str, s: float, n: int) -> float:
    return s * scaling.of(coll).busbw_factor(n)


def fit(model: str, coll: str, backend: str, pts: Sequence[Point]) -> scaling.Fit:
    return scaling.fit(model, coll, backend, [(n, g, s, t) for n, g, _, s, t in pts])


def rows(f: scaling.Fit, coll: str, dtype: str, tab: Dict[int, Dict[int, Tuple[float, float]]], target: int,
         g: int, keys: Sequence[int], sizes: Optional[Dict[int, float]] = None,
         consts: bands.Consts = bands.CONSTS, floor: float = 0.0, unchecked: bool = False) -> List[Row]:
    """The rows at target for each key; sizes: S per key where known (a measured run's); floor:
    bands.Parts'; unchecked: two flat counts, no topology: each row's slow side reaches the largest
    input's bus bandwidth falling bands.TIER per doubling."""
    out = []
    top = max(n for v in tab.values() for n in v)
    for key in keys:
        s = (sizes or {}).get(key) or target_bytes(coll, dtype, key, target)
        if not s:
            continue
        t, lo, hi, cand, known = scaling.predict(f, target, g, s)
        seen = tab.get(key, {})
        largest = max(seen) if seen else None
        trend = bands.loglinear({n: v[1] for n, v in seen.items()}, target)
        flat = bands.flat(seen[largest][1], bus_bytes(coll, seen[largest][0], largest),
                          bus_bytes(coll, s, target)) if largest else None
        others = [x for x in (trend, flat) if x]
        far, allowed, drop = log(target / top), 0.0, 0.0
        if unchecked and flat and target > top:
            allowed = bands.TIER * log2(target / top)
            drop = max(allowed - log(t / flat), 0.0)
        p = bands.parts(t, lo, hi, others, far, floor, drop, allowed)
        lo, hi, declined = bands.interval(p, consts)
        why = None if known else "unseen"
        if declined and why is None:
            why = "disagree" if p.spread > consts[2] else "flat"
        out.append(Row(key, s, t, lo, hi, tuple(cand), why, p, flat, trend))
    return out


def flat_rows(coll: str, dtype: str, tab: Dict[int, Dict[int, Tuple[float, float]]], n0: int, target: int,
              keys: Sequence[int], miss: float, sizes: Optional[Dict[int, float]] = None,
              consts: bands.Consts = bands.CONSTS) -> List[Row]:
    """After a change of regime: n0's bus bandwidth held, the interval the held-out miss implies
    (widened with the distance as any other)."""
    out = []
    for key in keys:
        s = (sizes or {}).get(key) or target_bytes(coll, dtype, key, target)
        if not s or n0 not in tab.get(key, {}):
            continue
        s0, t0 = tab[key][n0]
        t = bands.flat(t0, bus_bytes(coll, s0, n0), bus_bytes(coll, s, target))
        p = bands.Parts(t, miss, max(log(target / n0), 0.0), 0.0, miss)
        lo, hi, _ = bands.interval(p, consts)
        out.append(Row(key, s, t, lo, hi, ("flat",), None, p, t,
                       bands.loglinear({n: v[1] for n, v in tab[key].items()}, target)))
    return out


def held_out(model: str, coll: str, backend: str, dtype: str, pts: Sequence[Point], g: int,
             consts: bands.Consts = bands.CONSTS) -> Optional[Check]:
    """With three or more counts: refit without the largest and predict it."""
    ns = sorted({n for n, *_ in pts})
    if len(ns) < 3:
        return None
    top = ns[-1]
    rest = [x for x in pts if x[0] != top]
    f = fit(model, coll, backend, rest)
    tab, whole = table(rest), table(pts)
    mine = {k: v[top] for k, v in whole.items() if top in v}
    got = rows(f, coll, dtype, tab, top, g, sorted(mine), {k: v[0] for k, v in mine.items()}, consts)
    errs = [(log(r.t / mine[r.key][1]), r.why is not None or r.lo <= mine[r.key][1] <= r.hi) for r in got]
    if not errs:
        return None
    rms = (sum(log(1 + e) ** 2 for e in f["errors"]) / len(f["errors"])) ** 0.5
    return Check(top, bands.median([abs(e) for e, _ in errs]), rms, len(errs), sum(ok for _, ok in errs),
                 bands.median([abs(exp(e) - 1) for e, _ in errs]))


class Group(NamedTuple):
    f: scaling.Fit
    check: Optional[Check]
    regime: Optional[Tuple[int, int]]       # the counts between which the trend broke
    rows: List[Row]
    fall: Optional[float] = None            # two flat counts: how their bus bandwidth falls per doubling

    @property
    def flat(self) -> List[Row]:
        """The rows whose slow side two flat counts widened (bands.TIER)."""
        return [r for r in self.rows if r.parts.fall > 0]


def fall(coll: str, tab: Dict[int, Dict[int, Tuple[float, float]]], a: int, b: int) -> Optional[float]:
    """How the bus bandwidth falls per doubling from a to b ranks over the sizes >= 1 MiB (all
    where none is); None where no size ran at both."""
    large = {k: v for k, v in tab.items() if k >= scaling.MIB} or tab
    return bands.fall({k: {n: bus_bytes(coll, s, n) / t for n, (s, t) in v.items() if t > 0}
                       for k, v in large.items()}, a, b)


def flat_fall(coll: str, tab: Dict[int, Dict[int, Tuple[float, float]]], a: int, b: int) -> Optional[float]:
    """fall() where it is below bands.FLAT (flat counts); else None."""
    got = fall(coll, tab, a, b)
    return got if got is not None and got < bands.FLAT else None


def group(model: str, coll: str, backend: str, dtype: str, pts: Sequence[Point], target: int, g: int,
          keys: Sequence[int], sizes: Optional[Dict[int, float]] = None, consts: bands.Consts = bands.CONSTS,
          tier: Optional[bool] = None) -> Group:
    """One collective at target: the fit, the held-out check, the rows (docs/commands/predict.md).
    tier: the target needs a switch tier no input crossed (True: every row declined), or none
    (False: two flat counts get no allowance for a fall at the next tier); None: not known."""
    f = fit(model, coll, backend, pts)
    tab, ns = table(pts), sorted({n for n, *_ in pts})
    check = held_out(model, coll, backend, dtype, pts, g, consts)
    regime, flat_by = None, None
    if check and bands.regime_change(check.miss, check.rms):
        regime = (ns[-2], ns[-1])
        got = flat_rows(coll, dtype, tab, ns[-1], target, keys, check.miss, sizes, consts)
    else:
        # two flat counts show nothing of how the bus bandwidth falls beyond them
        flat_by = flat_fall(coll, tab, *ns) if len(ns) == 2 and target > ns[-1] and tier is None else None
        got = rows(f, coll, dtype, tab, target, g, keys, sizes, consts, check.miss if check else 0.0,
                   flat_by is not None)
        if scaling.of(coll).one_peer and target > ns[-1] and not check:
            got = [r._replace(why="same pair" if r.why in (None, "flat") else r.why) for r in got]
    if tier and target > ns[-1]:
        got = [r._replace(why=r.why or "tier") for r in got]
    return Group(f, check, regime, got, flat_by)


def rescore(r: Row, consts: bands.Consts) -> Row:
    """The row under other constants (calibration): its interval, and whether the models'
    disagreement declines it."""
    lo, hi, declined = bands.interval(r.parts, consts)
    why = r.why if r.why not in (None, "disagree", "flat") else (
        ("disagree" if r.parts.spread > consts[2] else "flat") if declined else None)
    return r._replace(lo=lo, hi=hi, why=why)

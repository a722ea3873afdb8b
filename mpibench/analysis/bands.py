"""How wrong a prediction beyond the inputs can be: the fit's own band says how well the model
fits the counts it saw; at a count it did not see the interval also widens with how far the
target lies beyond the largest input and with how much plausible models disagree there (the
fitted model, the trend of log time over log nodes, the largest input's bus bandwidth held).
A row whose models disagree by more than DECLINE is not predicted. Two counts whose bus bandwidth
does not fall (FLAT) show nothing of how it falls beyond them: the slow side of their rows
reaches the largest input's bus bandwidth falling TIER per doubling. The constants were chosen
by bench/predict_calibrate.py over every held-out case of ../shared/realworld/scaling
(docs/commands/predict.md says which data chose what)."""
from math import exp, hypot, log, log2
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

WIDEN = 0.15        # log half-width per e-fold of target / largest input
SPREAD = 0.05       # share of the models' disagreement (|log| of the farthest from the figure)
DECLINE = 2.0       # |log| disagreement beyond which a row is declined (*): x7.4
REGIME = 3.0        # a held-out miss this many times the fit's rms (log) ...
REGIME_MIN = 0.15   # ... and at least this (|log|, ~16%) is a change of regime
FLAT = 0.05         # two counts whose bus bandwidth falls less than this (log) per doubling are flat:
TIER = 0.56         # their slow side allows this fall per doubling, the largest of the shared series
Consts = Tuple[float, float, float]
CONSTS: Consts = (WIDEN, SPREAD, DECLINE)


class Parts(NamedTuple):
    """What a row's interval is made of: the figure, the fit's own band (|log|), the distance
    beyond the largest input (log of the ratio, 0 within), the models' disagreement (|log|)."""
    t: float
    fit: float
    far: float
    spread: float
    floor: float = 0.0       # a |log| the interval is at least (a held-out miss)
    slow: float = 0.0        # a |log| the slow side is at least (a fall flat inputs cannot rule out) ...
    fall: float = 0.0        # ... which from the largest input's bus bandwidth is this (|log|)


def loglinear(times: Dict[int, float], target: int) -> Optional[float]:
    """The trend of log time over log count (least squares) carried to target; None short of two counts."""
    if len(times) < 2:
        return None
    xs, ys = [log(n) for n in times], [log(t) for t in times.values()]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return exp(my + slope * (log(target) - mx))


def flat(time: float, bus_then: float, bus_at: float) -> float:
    """The largest input's bus bandwidth held: its time x the target's bus bytes / its own."""
    return time * bus_at / bus_then


def parts(t: float, lo: float, hi: float, others: Sequence[float], far: float, floor: float = 0.0,
          slow: float = 0.0, fall: float = 0.0) -> Parts:
    fit = max(log(hi / t), log(t / lo)) if lo > 0 else 0.0
    return Parts(t, fit, max(far, 0.0), max([abs(log(o / t)) for o in others if o > 0] or [0.0]), floor,
                 slow, fall)


def interval(p: Parts, consts: Consts = CONSTS) -> Tuple[float, float, bool]:
    """(low, high, declined): the fit's band and the widening in quadrature, at least the floor;
    the slow side at least p.slow; declined where the models or that fall exceed DECLINE."""
    widen, share, decline = consts
    h = max(hypot(p.fit, widen * p.far + share * p.spread), p.floor)
    return p.t * exp(-h), p.t * exp(max(h, p.slow)), p.far > 0 and max(p.spread, p.fall) > decline


def per_doubling(ratio: float, a: float, b: float) -> float:
    """A ratio between counts a and b as a fall (log) per doubling of the count."""
    return log(ratio) / log2(b / a)


def fall(bus: Dict[int, Dict[int, float]], a: int, b: int) -> Optional[float]:
    """The median fall per doubling of the bus bandwidth from count a to b over the sizes that
    ran at both ({size: {count: bus bandwidth}}); None where none did."""
    got = [per_doubling(v[a] / v[b], a, b) for v in bus.values()
           if a in v and b in v and v[a] > 0 and v[b] > 0]
    return median(got) if got else None


def half_width(lo: float, hi: float, t: float) -> float:
    """The interval's half-width as a share of the figure."""
    return (hi - lo) / 2 / t


def regime_change(miss: float, rms: float) -> bool:
    """Whether a held-out miss (median |log error|) is well beyond the fit's residuals (rms, log)."""
    return miss > max(REGIME * rms, REGIME_MIN)


def median(xs: List[float]) -> float:
    s = sorted(xs)
    return (s[(len(s) - 1) // 2] + s[len(s) // 2]) / 2 if s else 0.0

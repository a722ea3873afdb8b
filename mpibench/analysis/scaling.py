"""How a collective's time grows with nodes (docs/commands/predict.md has the model in full).
Ring and tree: candidates of NCCL's tuning model (src/graph/tuning.cc), run as NCCL's own
estimate picks, fitted in log space to all sizes at two or more node counts:

    t(a, p) = base_p + intra_p * I_a(n, N) + inter_p * E_a(n, N) + S * share_a(n) / (B_a * eff_p)

Exchanges (all_to_all, sendrecv), fitted to the input rows of nearly each row's bytes per
peer: t = base + P (latency + bytes per peer / bandwidth), P the peers across the network.
"""
from functools import partial
from math import ceil, exp, log, log2
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt

from ..measure.collectives import REGISTRY
from ..measure.collectives.base import Collective
from ..measure.sizes import format_size

MIB = 1 << 20
MODELS = ("nccl", "ring", "tree")
SHARP = 12.0        # how sharply NCCL's estimates pick (weights ~ estimate ** -SHARP)
# NCCL 2.18's latencies (us): base, per step within a node (NVLink), per network step
NCCL_LAT = {("ring", "LL"): (6.6, 0.6, 2.7), ("ring", "Simple"): (8.4, 3.4, 14.0),
            ("tree", "LL"): (6.8, 0.6, 5.0), ("tree", "Simple"): (0.0, 4.0, 14.0)}
NEAR = 4.0          # how far (x) an input's bytes per peer may be from the row's (exchanges)

Array = npt.NDArray[np.float64]
Point = Tuple[int, int, int, float]         # ranks, ranks per node, S, seconds
Candidate = Tuple[str, str]                 # (algorithm, protocol)


def nccl_estimate(a: str, p: str, coll: str, n: int, g: int, s: float, bus: float) -> float:
    """NCCL's estimate (us) of a candidate at n ranks, g per node, s bytes and bus GB/s, less its
    tree correction at medium sizes (the measured bus bandwidth already moves the crossover)."""
    i, e, share = shape(a, coll, n, g)
    base, intra, inter = NCCL_LAT[a, p]
    if e and a == "ring":       # across nodes each step also pays the network's post overhead
        intra = max(intra, 3.0 if p == "Simple" else 1.0)
    ring_ar = e and (a, p) == ("ring", "Simple") and of(coll).ring_passes == 2
    lat = (base + i * intra + e * inter) * (1.4 if ring_ar else 1)
    eff = {("ring", "LL"): 0.25, ("tree", "LL"): 0.92 / 3.8, ("tree", "Simple"): 0.92}.get((a, p), 1.0)
    return lat + s * share / (1000 * bus * eff)


def shape(algo: str, coll: str, n: int, g: int) -> Tuple[float, float, float]:
    """(intra-node steps I, network steps E, bytes per S on the slowest link)."""
    nodes = max(n // g, 1)
    if algo == "tree":      # all_reduce: up then down a tree of nodes, a chain in each node
        return 2.0 * (g - 1), 2.0 * ceil(log2(nodes)) if nodes > 1 else 0.0, 2.0
    c = of(coll)
    steps, inter = c.ring_passes * (n - 1), c.ring_passes * (nodes - 1)
    return float(steps - inter), float(inter), c.busbw_factor(n) if c.nccl_ring else 1.0


class Model:
    """One collective's candidates; params is a vector of log constants: base, intra, inter per
    protocol, B per algorithm, eff per protocol but Simple, the factor on 1-2 nodes."""

    def __init__(self, model: str, coll: str, backend: str) -> None:
        self.coll, nccl = coll, str(backend).startswith("nccl")
        tree = of(coll).nccl_tree
        self.algos = ["ring", "tree"] if tree and nccl else ["ring"]   # trees are NCCL's
        if model in ("ring", "tree"):
            self.algos = [model] if model == "ring" or tree else ["ring"]
        self.protos = ["LL", "Simple"] if nccl else ["Simple"]
        self.cands = [(a, p) for a in self.algos for p in self.protos]

    def features(self, pts: Sequence[Tuple[int, int, float]],
                 bus: Optional[Dict[int, float]] = None) -> Tuple[Array, Array]:
        """pts: [(n, g, S)] -> (candidates x 4 x points: I, E, S * share, on 1 or 2 nodes; candidates
        x points: NCCL's choice as weights, from bus {ranks: GB/s}, the largest count's for others)."""
        v = np.array([[shape(a, self.coll, n, g) + (s, n // g <= 2) for n, g, s in pts]
                      for a, _ in self.cands], float).reshape(len(self.cands), -1, 5)
        feats = np.stack([v[..., 0], v[..., 1], v[..., 2] * v[..., 3], v[..., 4]], axis=1)
        if not bus or len(self.cands) == 1:
            return feats, np.full((len(self.cands), len(pts)), 1.0 / len(self.cands))
        est = np.array([[nccl_estimate(a, p, self.coll, n, g, s, bus.get(n, bus[max(bus)]))
                         for n, g, s in pts] for a, p in self.cands]) ** -SHARP
        return feats, est / est.sum(axis=0)

    def time(self, x: Array, feats: Tuple[Array, Array]) -> Array:
        """The time of what NCCL runs: its choice's weights on every candidate's times."""
        c, out = np.exp(x), []
        for (a, p), (i, e, b, two) in zip(self.cands, feats[0]):
            k = 3 * self.protos.index(p)
            out.append(c[k] + c[k + 1] * i + c[k + 2] * e + b / self.bandwidth(x, c, a, p, two))
        t: Array = (np.array(out) * feats[1]).sum(axis=0)
        return t

    def bandwidth(self, x: Array, c: Array, a: str, p: str,
                  two: Union[float, Array] = 0.0) -> Union[float, Array]:
        """a's B (c: exp(x)) x p's share of it (a logistic, below 1), x its factor on 1-2 nodes (two)."""
        np_ = len(self.protos)
        eff = 1.0 if p == "Simple" else \
            1.0 / (1.0 + np.exp(-x[3 * np_ + len(self.algos) + self.protos.index(p)]))
        b: Union[float, Array] = c[3 * np_ + self.algos.index(a)] * np.exp(x[-1] * two) * eff
        return b

    def start(self, pts: Sequence[Tuple[int, int, float]], secs: Array) -> Array:
        """Initial constants: the smallest time as latency, the largest bytes / time as bandwidth."""
        tmin, bw = float(np.min(secs)), float(np.max(self.features(pts)[0][:, 2] / secs))
        x = [log(tmin * (0.5 if p == "LL" else 1.0) / d) for p in self.protos for d in (2, 50, 10)]
        x += [log(bw) + (log(0.9) if a == "tree" else 0.0) for a in self.algos]
        x += [log(0.3 / 0.7)] * (len(self.protos) - 1)
        return np.array(x + [0.0])


class Fit(TypedDict, total=False):
    """fit()'s result: NCCL's model's (model set), or an exchange's (model None)."""
    model: Optional[Model]
    errors: List[float]             # predicted / measured - 1 per input point
    # NCCL's model
    best: Array                     # the log constants of the best fit
    members: List[Array]            # the other fits: starts and resampled points
    bus: Dict[int, float]           # NCCL's bus bandwidth at each count (GB/s)
    chosen: Dict[Candidate, List[int]]     # the sizes NCCL chose each candidate at
    sizes: List[int]
    # an exchange's
    coll: str
    points: Sequence[Point]
    bw: List[Tuple[float, float]]   # (peers, best network bytes/s per rank)
    trend: float                    # cost per peer ~ peers ** trend


def _lm(residuals: Callable[[Array], Array], x: Array, iters: int = 80, lam: float = 1e-2,
        most: float = 3.0) -> Tuple[Array, float]:
    """Levenberg-Marquardt on residuals(x), numeric Jacobian, damped from lam, steps <= most: (x, cost)."""
    r = residuals(x)
    cost = float(r @ r)
    for _ in range(iters):
        jac = np.array([(residuals(x + 1e-5 * e) - r) / 1e-5 for e in np.eye(len(x))]).T
        a, grad = jac.T @ jac, jac.T @ r
        while True:
            try:
                step = np.linalg.solve(a + lam * (np.diag(np.diag(a)) + 1e-9 * np.eye(len(x))), -grad)
            except np.linalg.LinAlgError:
                return x, cost
            step = np.clip(step, -most, most)
            r2 = residuals(x + step)
            c2 = float(r2 @ r2)
            if np.isfinite(c2) and c2 < cost:
                done = cost - c2 < 1e-9 * (1 + cost)
                x, r, cost, lam = x + step, r2, c2, max(lam / 3, 1e-9)
                break
            lam *= 5
            if lam > 1e9:
                return x, cost
        if done:
            break
    return x, cost


def of(coll: str) -> Collective:
    """The registry's collective of that name; one of no known shape (a log's other test) else."""
    return REGISTRY.get(coll) or Collective()


def peers(coll: str, n: int, g: int) -> Tuple[float, float]:
    """(peers across the network, bytes per peer per S) of one rank's exchange."""
    return (float(n > g), 1.0) if of(coll).one_peer else (float(n - g if n > g else 0), 1.0 / n)


def _local(f: "Fit", n: int, g: int, s: float,
           near: float = NEAR) -> Optional[Tuple[float, float, Array, int]]:
    """An exchange of S = s on n ranks fitted in log space to the input rows within near x of its bytes
    per peer, the nearer weighing more: (time, its part per network peer, weighted log residuals,
    input counts within sqrt(NEAR) x), or None short of two counts."""
    coll = f["coll"]
    mine = s * peers(coll, n, g)[1]         # the row's bytes per peer

    def far(x: Point) -> float:     # |log| of an input row's bytes per peer over the row's
        return abs(log(x[2] * peers(coll, *x[:2])[1] / mine))

    pts = [x for x in f["points"] if far(x) <= log(near)]
    if len({x[0] for x in pts}) < 2:
        return None
    split = len({x[0] <= 2 * x[1] for x in pts}) > 1     # inputs on 1-2 nodes and on more

    # base, latency, bytes / bandwidth (on 1-2 nodes their own)
    def cols(n: int, g: int, s: float, *_: float) -> List[float]:
        p, per = peers(coll, n, g)
        two = split and n <= 2 * g
        return [1.0, p, p * s * per * (not two), p * s * per * two][:3 + split]
    w = np.array([1 - far(x) / log(near) for x in pts])
    a = np.array([cols(*x) for x in pts]) / np.array([x[3] for x in pts])[:, None]
    c = np.exp(_lm(lambda x: w * np.log(a @ np.exp(x)), np.log(0.25 / a.mean(axis=0)))[0])
    row = np.array(cols(n, g, s))
    close = {x[0] for x in pts if far(x) <= log(NEAR) / 2}
    return float(row @ c), float(row[1:] @ c[1:]), w * np.log(a @ c), len(close)


def fit(model: str, coll: str, backend: str, points: Sequence[Point], tries: int = 6, resamples: int = 16,
        seed: int = 0) -> "Fit":
    """points: [(n, g, S, seconds)] at two or more node counts. -> {'model', 'best' (log
    constants), 'members' (other fits: starts and resampled points), 'errors' (best fit's
    predicted / measured - 1 per point), 'chosen' ({candidate: sizes NCCL chose it at})}. An exchange's:
    'points', 'errors', 'bw' ([(peers, best network bytes/s per rank)]), 'trend' (cost/peer ~ peers^trend)"""
    if of(coll).exchange:
        f: Fit = {"coll": coll, "points": points, "model": None}
        fastest: Dict[float, float] = {}
        for n, g, s, t in points:
            p, per = peers(coll, n, g)
            fastest[p] = max(fastest.get(p, 0.0), p * s * per / t)
        f["bw"] = bw = sorted((p, b) for p, b in fastest.items() if p)
        # none where more peers ran faster: a network gets no faster per peer with more of them
        f["trend"] = max(0.0, log(bw[0][1] / bw[-1][1]) / log(bw[-1][0] / bw[0][0])) if len(bw) > 1 else 0.0
        f["errors"] = [r[0] / x[3] - 1 for x in points if (r := _local(f, *x[:3]))] or [0.0]
        return f
    m = Model(model, coll, backend)
    pts = [(n, g, s) for n, g, s, _ in points]
    secs = np.array([t for *_, t in points], float)
    bus: Dict[int, float] = {}        # NCCL's bus bandwidth at each count: the best one measured (GB/s)
    for (n, g, s), t in zip(pts, secs):
        bus[n] = max(bus.get(n, 0.0), s * shape("ring", coll, n, g)[2] / t / 1e9)
    feats = m.features(pts, bus)

    def res(x: Array, idx: Union[slice, "npt.NDArray[np.int64]"] = slice(None)) -> Array:
        r: Array = np.log(m.time(x, (feats[0][..., idx], feats[1][:, idx])) / secs[idx])
        return r

    rng = np.random.default_rng(seed)
    x0 = m.start(pts, secs)
    fits = [_lm(res, x0 + (rng.normal(0, 0.7, x0.size) if k else 0)) for k in range(tries)]
    fits.sort(key=lambda f: f[1])
    best = fits[0][0]
    # A resample's fit moves from the best in damped, short steps, so that it stays in the best's
    # basin: with free steps the least rounding (another CPU's BLAS) led one into another minimum.
    members = [x for x, _ in fits] + [_lm(partial(res, idx=idx), best.copy(), 30, 1e2, 0.5)[0]
                                      for idx in rng.integers(0, len(pts), (resamples, len(pts)))]
    # the starts and fits to points drawn again that fit all points within 1.5x the best's cost
    members = [x for x in members if float(res(x) @ res(x)) <= fits[0][1] * 1.5 + 1e-9]
    chosen: Dict[Candidate, List[int]] = {}
    for i, (_, _, s) in zip(np.argmax(feats[1], axis=0), pts):
        chosen.setdefault(m.cands[i], []).append(s)
    return {"model": m, "best": best, "members": members, "bus": bus, "chosen": chosen,
            "errors": list(m.time(best, feats) / secs - 1), "sizes": [s for _, _, s in pts]}


def predict(f: "Fit", n: int, g: int, size: float) -> Tuple[float, float, float, Tuple[str, ...], bool]:
    """(time, low, high, the candidate NCCL runs, whether NCCL ran it at an input size
    within 4x: else extrapolated) at n ranks, g per node, S = size. An exchange's: the middle of
    the fit (cost per peer as at the largest input) and of it following the trend, spanning both."""
    if f["model"] is None:
        got = _local(f, n, g, size) or _local(f, n, g, size, np.inf)
        assert got is not None      # every input within an infinite distance: two counts or more
        t, grow, res, close = got
        other = t + grow * ((peers(f["coll"], n, g)[0] / f["bw"][-1][0]) ** f["trend"] - 1) if f["bw"] else t
        q = float(np.quantile(np.abs(res), 0.8))
        return (t * other) ** 0.5, min(t, other) * exp(-q), max(t, other) * exp(q), ("p2p",), close > 1
    m = f["model"]
    # independent, so in quadrature: the fits' spread, the 80th percentile of |log error| at the band's sizes
    e = [abs(log(1 + err)) for err, s in zip(f["errors"], f["sizes"]) if (s >= MIB) == (size >= MIB)]
    q = float(np.quantile(e or [abs(log(1 + err)) for err in f["errors"]], 0.8))
    feats = m.features([(n, g, size)], f["bus"])
    t = float(m.time(f["best"], feats)[0])
    ens = np.log([float(m.time(x, feats)[0]) / t for x in f["members"]] + [1.0])
    cand = m.cands[int(np.argmax(feats[1][:, 0]))]
    known = any(size / 4 <= s <= size * 4 for s in f["chosen"].get(cand, ()))
    return t, t * exp(-np.hypot(ens.min(), q)), t * exp(np.hypot(ens.max(), q)), cand, known


def describe(f: "Fit") -> List[str]:
    """The fitted constants, one line per candidate algorithm and protocol."""
    if f["model"] is None:
        bw = ", ".join(f"{b / 1e9:.3g} GB/s with {p:g} peers" for p, b in f["bw"])
        return [f"p2p by bytes per peer (fitted to the input sizes within {NEAR:g}x of each); network GB/s "
                f"per rank {bw}: cost per peer ~ peers^{f['trend']:.3f}; predicted: midway from none to that"]
    m, c, out = f["model"], np.exp(f["best"]), []
    for a, p in m.cands:
        k, rate = m.protos.index(p), m.bandwidth(f["best"], c, a, p)
        got = f["chosen"].get((a, p))
        seen = f"NCCL's at {format_size(min(got))}-{format_size(max(got))}" if got else "never NCCL's"
        out.append(f"{a}/{p}: base {c[3 * k] * 1e6:.1f} us, {c[3 * k + 1] * 1e6:.2f} us per "
                   f"intra-node step, {c[3 * k + 2] * 1e6:.2f} us per network step, "
                   f"{rate / 1e9:.4g} GB/s ({seen} choice in the inputs)")
    if f["best"][-1]:
        out.append(f"runs on 1 or 2 nodes: bandwidth x {exp(f['best'][-1]):.3g}")
    return out

"""How a collective's time grows with nodes: candidates of the shape NCCL's tuning model
gives (src/graph/tuning.cc), their constants fitted to what was measured. A candidate is
an algorithm a and a protocol p; for nccl-tests' byte count S on n ranks and N nodes,

    t(a, p) = base_p + intra_p * I_a(n, N) + inter_p * E_a(n, N) + S * share_a(n) / (B_a * eff_p)

NCCL runs the fastest candidate per size, so the model's time is a (smoothed) minimum over
them. docs/commands/predict.md gives I, E and share per algorithm, how the constants are
fitted (in log space, from all sizes at two or more node counts) and the interval.
"""
from math import ceil, exp, log, log2

import numpy as np

SHARP = 8.0         # smoothing of the minimum over candidates (a power mean of -SHARP)
MIB = 1 << 20
MODELS = ("nccl", "ring", "tree")


def shape(algo, coll, n, g):
    """(intra-node steps I, network steps E, bytes per S on the slowest link)."""
    nodes = max(n // g, 1)
    if algo == "tree":      # all_reduce: up then down a tree of nodes, a chain in each node
        return 2.0 * (g - 1), 2.0 * ceil(log2(nodes)) if nodes > 1 else 0.0, 2.0
    if coll == "all_to_all":            # one exchange with every peer; the network carries
        inter = n - g if nodes > 1 else 0   # what goes to other nodes
        return float(n - 1 - inter), float(inter), ((n - g) if nodes > 1 else (n - 1)) / n
    k = 2 if coll == "all_reduce" else 1
    steps, inter = k * (n - 1), k * (nodes - 1)
    if coll in ("sendrecv",):
        steps, inter = 1, 1 if nodes > 1 else 0
    share = {"all_reduce": 2.0 * (n - 1) / n, "all_gather": (n - 1) / n,
             "reduce_scatter": (n - 1) / n}.get(coll, 1.0)
    return float(steps - inter), float(inter), share


def candidates(model, coll, backend):
    """[(algorithm, protocol)] the fit considers."""
    nccl = str(backend).startswith("nccl")
    algos = ["ring", "tree"] if coll == "all_reduce" and nccl else ["ring"]   # trees are NCCL's
    if model in ("ring", "tree"):
        algos = [model] if model == "ring" or coll == "all_reduce" else ["ring"]
    if coll in ("all_to_all", "sendrecv"):      # exchanges with peers, no ring
        algos = ["p2p"]
    protos = ["LL", "Simple"] if nccl else ["Simple"]
    return [(a, p) for a in algos for p in protos]


class Model:
    """One collective's candidates; params is a vector of log constants."""

    def __init__(self, model, coll, backend):
        self.coll = coll
        self.cands = candidates(model, coll, backend)
        self.algos = sorted({a for a, _ in self.cands})
        self.protos = sorted({p for _, p in self.cands}, key=["LL", "Simple"].index)
        # base, intra, inter per protocol; B per algorithm; eff per protocol but Simple;
        # ... and the bandwidth factor of runs on 1 or 2 nodes
        self.size = 3 * len(self.protos) + len(self.algos) + len(self.protos)

    def features(self, pts):
        """pts: [(n, g, S)] -> per candidate arrays (I, E, S * share, on 1 or 2 nodes)."""
        out = []
        for a, _ in self.cands:
            rows = [shape(a, self.coll, n, g) + (s, float(n // g <= 2)) for n, g, s in pts]
            arr = np.array(rows, float).reshape(-1, 5)
            out.append((arr[:, 0], arr[:, 1], arr[:, 2] * arr[:, 3], arr[:, 4]))
        return out

    def times(self, x, feats):
        """Every candidate's time at every point (candidates x points)."""
        c = np.exp(x)
        np_ = len(self.protos)
        out = []
        for (a, p), (i, e, b, two) in zip(self.cands, feats):
            k = self.protos.index(p)
            base, intra, inter = c[3 * k:3 * k + 3]
            bw = c[3 * np_ + self.algos.index(a)]
            eff = 1.0 if p == "Simple" else _share(x[3 * np_ + len(self.algos) + k])
            bw = bw * np.exp(x[-1] * two)
            out.append(base + intra * i + inter * e + b / (bw * eff))
        return np.array(out)

    def time(self, x, feats):
        t = self.times(x, feats)
        return (t ** -SHARP).sum(axis=0) ** (-1.0 / SHARP)

    def start(self, pts, secs):
        """Initial constants from the data: the smallest time as latency, the largest
        bytes / time as bandwidth."""
        tmin = float(np.min(secs))
        feats = self.features(pts)
        bw = max(float(np.max(f[2] / secs)) for f in feats)
        x = []
        for p in self.protos:
            scale = 0.5 if p == "LL" else 1.0
            x += [log(tmin * scale / 2), log(tmin * scale / 50), log(tmin * scale / 10)]
        x += [log(bw) + (log(0.9) if a == "tree" else 0.0) for a in self.algos]
        x += [log(0.3 / 0.7)] * (len(self.protos) - 1)
        return np.array(x + [0.0])


def _share(v):
    """A protocol's share of the bandwidth, below 1 (a logistic of its parameter)."""
    return 1.0 / (1.0 + np.exp(-v))


def _lm(residuals, x, iters=80):
    """Levenberg-Marquardt on a residual function of x (numeric Jacobian): (x, cost)."""
    r = residuals(x)
    cost, lam = float(r @ r), 1e-2
    for _ in range(iters):
        h = 1e-5
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            d = x.copy()
            d[j] += h
            jac[:, j] = (residuals(d) - r) / h
        a, grad = jac.T @ jac, jac.T @ r
        while True:
            try:
                step = np.linalg.solve(a + lam * (np.diag(np.diag(a)) + 1e-9 * np.eye(len(x))), -grad)
            except np.linalg.LinAlgError:
                return x, cost
            step = np.clip(step, -3, 3)
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


def fit(model, coll, backend, points, tries=6, resamples=16, seed=0):
    """points: [(n, g, S, seconds)] at two or more node counts. -> {'model', 'best' (log
    constants), 'members' (other fits: starts and resampled points), 'errors' (best fit's
    predicted / measured - 1 per point), 'chosen' (candidates chosen at measured points)}"""
    m = Model(model, coll, backend)
    pts = [(n, g, s) for n, g, s, _ in points]
    secs = np.array([t for *_, t in points], float)
    feats = m.features(pts)

    def res(x, idx=slice(None)):
        return np.log(m.time(x, [tuple(f[idx] for f in fe) for fe in feats]) / secs[idx])

    rng = np.random.default_rng(seed)
    x0 = m.start(pts, secs)
    fits = [_lm(res, x0 + (rng.normal(0, 0.7, m.size) if k else 0)) for k in range(tries)]
    fits.sort(key=lambda f: f[1])
    best = fits[0][0]
    members = [x for x, c in fits if c <= fits[0][1] * 1.5 + 1e-9]
    for _ in range(resamples):      # refit on points drawn with replacement
        idx = rng.integers(0, len(pts), len(pts))
        members.append(_lm(lambda x: res(x, idx), best.copy(), iters=30)[0])
    t = m.time(best, feats)
    chosen = {m.cands[i] for i in np.argmin(m.times(best, feats), axis=0)}
    return {"model": m, "best": best, "members": members,
            "errors": list(t / secs - 1), "sizes": [s for _, _, s in pts], "chosen": chosen}


def residual_band(f, big):
    """The 80th percentile of the best fit's |log error| at measured points of the same
    band (sizes >= 1 MiB, or below)."""
    e = [abs(log(1 + err)) for err, s in zip(f["errors"], f["sizes"]) if (s >= MIB) == big]
    e = e or [abs(log(1 + err)) for err in f["errors"]]
    return float(np.quantile(e, 0.8))


def predict(f, n, g, size):
    """(time, low, high, candidate NCCL would run) at n ranks, g per node, S = size."""
    m = f["model"]
    feats = m.features([(n, g, size)])
    t = float(m.time(f["best"], feats)[0])
    ens = [float(m.time(x, feats)[0]) for x in f["members"]] + [t]
    q = residual_band(f, size >= MIB)
    chosen = m.cands[int(np.argmin(m.times(f["best"], feats)[:, 0]))]
    return t, min(ens) * np.exp(-q), max(ens) * np.exp(q), chosen


def describe(f):
    """The fitted constants, one line per candidate algorithm and protocol."""
    m, c = f["model"], np.exp(f["best"])
    np_ = len(m.protos)
    out = []
    for a, p in m.cands:
        k = m.protos.index(p)
        bw = c[3 * np_ + m.algos.index(a)] * (
            1.0 if p == "Simple" else _share(f["best"][3 * np_ + len(m.algos) + k]))
        seen = "chosen at measured sizes" if (a, p) in f["chosen"] else "never the fastest measured"
        out.append(f"{a}/{p}: base {c[3 * k] * 1e6:.1f} us, {c[3 * k + 1] * 1e6:.2f} us per "
                   f"intra-node step, {c[3 * k + 2] * 1e6:.2f} us per network step, "
                   f"{bw / 1e9:.4g} GB/s ({seen})")
    if f["best"][-1]:
        out.append(f"runs on 1 or 2 nodes: bandwidth x {exp(f['best'][-1]):.3g}")
    return out


def rms(errors):
    return (sum(e * e for e in errors) / len(errors)) ** 0.5 if errors else 0.0

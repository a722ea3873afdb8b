"""How a collective's time grows with the number of ranks: a two-term model and its fit.

    t(n, S) = alpha * f(n) + beta * g(n) * S

S is nccl-tests' byte count of the row (bw_bytes), n the number of ranks. alpha is the
cost of one step (latency: software, network round trip), beta the seconds per byte on
one link (1/beta: the link's bandwidth). f counts the sequential steps, g the share of
S every rank must send, from the algorithm:

  ring  f: all_reduce 2(n-1) (reduce-scatter then all-gather), all_gather,
           reduce_scatter, all_to_all n-1, broadcast and reduce n-1 (a pipelined
           chain), sendrecv 1
  tree  f: ceil(log2 n) per phase (all_reduce: 2 phases, up and down; sendrecv 1)
  g (both): all_reduce 2(n-1)/n, all_gather, reduce_scatter, all_to_all (n-1)/n,
            broadcast, reduce, sendrecv 1 (pipelined: every link carries S once)

So with g fixed by the bytes that must move, a ring's latency grows linearly with n
and a tree's logarithmically, while busbw tends to 1/beta for both. The fit minimises
the relative error over every measured (n, S) point of one collective, so small
(latency-bound) and large (bandwidth-bound) sizes weigh alike; alpha and beta are
kept non-negative.
"""
from math import ceil, log2

MODELS = ("ring", "tree")


def steps(model, collective, n):
    """f(n): sequential steps."""
    if collective == "sendrecv" or n < 2:
        return 1.0
    if model == "tree":
        return (2.0 if collective == "all_reduce" else 1.0) * ceil(log2(n))
    return (2.0 if collective == "all_reduce" else 1.0) * (n - 1)


def share(collective, n):
    """g(n): the share of S each rank sends."""
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def formula(model, collective):
    f = {"sendrecv": "1"}.get(collective) or (
        ("2" if collective == "all_reduce" else "") +
        ("ceil(log2 n)" if model == "tree" else "(n-1)"))
    g = {"all_reduce": "2(n-1)/n", "all_gather": "(n-1)/n", "reduce_scatter": "(n-1)/n",
         "all_to_all": "(n-1)/n"}.get(collective, "1")
    return f"t = alpha*{f} + beta*{g}*S"


def predict(fit, n, size):
    return fit["alpha"] * steps(fit["model"], fit["collective"], n) + \
        fit["beta"] * share(fit["collective"], n) * size


def fit(model, collective, points):
    """points: [(n, S, seconds)]. -> {'model', 'collective', 'alpha', 'beta', 'errors'}
    with errors[i] = predicted / measured - 1 for each point."""
    import numpy as np
    a = np.array([[steps(model, collective, n) / t, share(collective, n) * s / t]
                  for n, s, t in points], float)
    b = np.ones(len(points))
    coef = np.linalg.lstsq(a, b, rcond=None)[0]
    if (coef < 0).any():       # the best non-negative fit has one term only: try both
        best = None
        for j in (0, 1):
            c = np.zeros(2)
            col = a[:, j]
            c[j] = max(float(col @ b / (col @ col)), 0.0) if col @ col > 0 else 0.0
            err = float(((a @ c) - b) @ ((a @ c) - b))
            if best is None or err < best[0]:
                best = (err, c)
        coef = best[1]
    out = {"model": model, "collective": collective, "alpha": float(coef[0]),
           "beta": float(coef[1])}
    out["errors"] = [predict(out, n, s) / t - 1 for n, s, t in points]
    return out


def rms(errors):
    return (sum(e * e for e in errors) / len(errors)) ** 0.5 if errors else 0.0

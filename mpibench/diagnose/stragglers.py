"""Who is slow: per-host figures and stragglers from every rank's per-iteration times.

A rank or host is named slow only when it is slow consistently: in at least
`consistency` of the iterations its time exceeds the median of that iteration by more
than `margin`. One noisy iteration names nobody.
"""
from statistics import median


def analyze(hosts, times, margin=0.2, consistency=0.8):
    """hosts[r]: host of rank r; times[r][k]: seconds of rank r in iteration k.

    Returns {'ranks': [...], 'hosts': [...], 'slowest': {...}, 'slow_hosts': [...],
    'slow_ranks': [...], 'iterations': K, 'margin': m, 'consistency': c}.
    """
    n = len(times)
    iters = min(len(t) for t in times) if times else 0
    rank_med = [median(t[:iters]) for t in times]
    mid = median(rank_med)
    order = list(dict.fromkeys(hosts))
    members = {h: [r for r in range(n) if hosts[r] == h] for h in order}

    slowest = max(range(n), key=lambda r: rank_med[r])
    out = {"iterations": iters, "margin": margin, "consistency": consistency,
           "ranks": [{"rank": r, "host": hosts[r], "median_s": rank_med[r]} for r in range(n)],
           "median_rank_s": mid,
           "slowest": {"rank": slowest, "host": hosts[slowest], "median_s": rank_med[slowest],
                       "ratio": rank_med[slowest] / mid if mid > 0 else None},
           "hosts": [], "slow_hosts": [], "slow_ranks": []}

    host_iter = {h: [max(times[r][k] for r in members[h]) for k in range(iters)] for h in order}
    iter_mid = [median(host_iter[h][k] for h in order) for k in range(iters)]
    for h in order:
        meds = [rank_med[r] for r in members[h]]
        worst = max(members[h], key=lambda r: rank_med[r])
        verdict = consistently_slow(host_iter[h], iter_mid, margin, consistency)
        out["hosts"].append({"host": h, "ranks": members[h], "min_s": min(meds),
                             "median_s": median(meds), "max_s": max(meds), "slowest_rank": worst,
                             "ratio": verdict["ratio"], "slow_iterations": verdict["slow_iterations"]})
        if len(order) > 1 and verdict["slow"]:
            out["slow_hosts"].append(h)

    rank_mid = [median(times[r][k] for r in range(n)) for k in range(iters)]
    for r in range(n):
        verdict = consistently_slow(times[r][:iters], rank_mid, margin, consistency)
        out["ranks"][r]["slow_iterations"] = verdict["slow_iterations"]
        if n > 1 and verdict["slow"]:
            out["slow_ranks"].append(r)
    return out


def consistently_slow(times, reference, margin, consistency):
    """times[k] against reference[k], seconds in iteration k: slow when over
    (1 + margin) x the reference in at least `consistency` of the iterations.

    Returns {'ratio': median of times/reference, 'slow_iterations': k, 'slow': bool}.
    """
    ratios = [t / ref for t, ref in zip(times, reference) if ref > 0]
    slow = sum(1 for x in ratios if x > 1 + margin)
    return {"ratio": median(ratios) if ratios else None, "slow_iterations": slow,
            "slow": bool(times) and slow >= consistency * len(times)}

"""`verify`'s judgement, without processes: each check's figure, reference, ratio and
verdict (PASS, FAIL, LOW, HIGH, INCONCLUSIVE, INFO, n/a: docs/verify.md says when each)."""
import math
from functools import partial
from statistics import median
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..measure import iterstats
from ..measure.sizes import format_size
from ..results.numbers import us

CPU_TIMER_TOLERANCE = 0.05     # CPUs: within 5% at CPU_JUDGED and up (a shared machine is noisy)
GPU_TIMER_TOLERANCE = 0.02     # GPUs: within 2% at GPU_JUDGED and up
CPU_JUDGED = 1 << 20
GPU_JUDGED = 64 << 20
PASS_CONFIDENCE = 0.95         # the timer check's interval for a PASS (and the one shown)
FAIL_CONFIDENCE = 0.999        # ... and for a FAIL: at least 11 pairs of rounds
MOST_ROUNDS = 1000             # an estimate of the rounds a verdict needs is given up to this
FLOOR = 0.8                    # a share of the peer's figure below this is a finding

KNOBS_TCP = ("the interface the ranks use (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, "
             "launch/mpirun.sh --iface), larger sizes (-e), one rank per host first, "
             "then the NIC's offloads and MTU")
KNOBS_PEER = ("the same launcher, hosts, ranks and sizes for both; -z (blocking mode); "
              "NCCL_ALGO / NCCL_PROTO for nccl-tests; for MPI the BTL or PML "
              "(--mca btl_tcp_if_include, pml ucx)")


def check(name: str, figure: str, reference: str, ratio: Optional[float], verdict: str,
          reason: str = "") -> Dict[str, Any]:
    return {"check": name, "figure": figure, "reference": reference, "ratio": ratio,
            "verdict": verdict, "reason": reason}


def spread(values: Sequence[float]) -> Optional[float]:
    """(max - min) / median: how far the rounds of one timer scattered."""
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else None


def timer(size: int, harness: Sequence[float], bare: Sequence[float], tolerance: float,
          judged_from: int) -> Dict[str, Any]:
    """mpibench's loop against the bare loop at one size (seconds per call per round)."""
    ratios = paired_ratios(harness, bare)
    fig, ref = (f"{us(median(x))} us (spread {spread(x):.0%})" for x in (harness, bare))
    name = f"timer {format_size(size)}"
    if size < judged_from:      # the interval's centre where there is one, as judge()'s
        ci = interval(ratios, PASS_CONFIDENCE)
        r = ci[1] if ci else median(ratios or [h / b for h, b in zip(harness, bare)])
        return check(name, fig, ref, r, "INFO", f"below {format_size(judged_from)}: latency, "
                     f"where one call's own cost differs, not judged")
    return judge(name, fig, ref, ratios, tolerance)


def timers_together(got: Mapping[int, Mapping[str, Sequence[float]]], tolerance: float,
                    judged_from: int) -> Optional[Dict[str, Any]]:
    """Every judged size's pairs as one sample (a timer that stops early does at every size)."""
    sizes = sorted(s for s in got if s >= judged_from)
    if len(sizes) < 2:
        return None
    ratios = [r for s in sizes for r in paired_ratios(got[s]["harness"], got[s]["bare"])]
    counts = ", ".join(f"{len(got[s]['bare']) // 2} at {format_size(s)}" for s in sizes)
    return judge(f"timer {format_size(sizes[0])}-{format_size(sizes[-1])}",
                 f"mpibench's loop: pairs {counts}", "the bare loop", ratios, tolerance)


def judge(name: str, fig: str, ref: str, ratios: Sequence[float], tolerance: float) -> Dict[str, Any]:
    """PASS when the ratio's 95% interval lies within the tolerance, FAIL when its 99.9%
    one lies wholly beyond it (docs/verify.md says why 99.9%), INCONCLUSIVE otherwise."""
    ci, sure = interval(ratios, PASS_CONFIDENCE), interval(ratios, FAIL_CONFIDENCE)
    r = ci[1] if ci else (median(ratios) if ratios else None)
    pairs = f"{len(ratios)} pair{'s' if len(ratios) != 1 else ''} of rounds (one in each order)"
    if ci is None:
        need: Optional[float] = 2 * next(n for n in range(64) if interval([1.0] * n, PASS_CONFIDENCE))
        return dict(check(name, fig, ref, r, "INCONCLUSIVE",
                          f"{pairs}: too few for a {PASS_CONFIDENCE:.0%} interval; "
                          f"{need} rounds would give one (--rounds {need})"), rounds_needed=need)
    lo, _, hi = ci
    assert r is not None
    found = dict(check(name, fig, ref, r, "PASS"), interval=[lo, hi])
    if 1 - tolerance <= lo and hi <= 1 + tolerance:
        return found
    if sure and (sure[2] < 1 - tolerance or sure[0] > 1 + tolerance):
        side = "shorter" if r < 1 else "longer"
        return dict(found, verdict="FAIL", interval=[sure[0], sure[2]], reason=(
            f"mpibench's loop is {abs(r - 1):.0%} {side} than the bare loop: the ratio's "
            f"{FAIL_CONFIDENCE:.1%} interval {sure[0]:.3f}-{sure[2]:.3f} over {pairs} lies "
            f"wholly beyond the tolerance ({tolerance:.0%})"))
    beyond = hi < 1 - tolerance or lo > 1 + tolerance       # at 95%, not yet at 99.9%
    need = rounds_needed(ratios, lo, hi, r, tolerance, beyond)
    more = (f"about {need} rounds would decide (--rounds {need}, or a --budget that "
            f"allows them)" if need else f"more than {MOST_ROUNDS} rounds would be needed: "
            f"rerun on a quieter machine, or with larger sizes")
    where = (f"lies beyond the tolerance ({tolerance:.0%}), its {FAIL_CONFIDENCE:.1%} "
             f"interval, which a FAIL needs, not yet" if beyond else
             f"straddles the tolerance ({tolerance:.0%})")
    return dict(found, verdict="INCONCLUSIVE", rounds_needed=need, reason=(
        f"the ratio's {PASS_CONFIDENCE:.0%} interval {lo:.3f}-{hi:.3f} over {pairs} {where}: "
        f"the pairs scatter by {spread(ratios):.0%}; {more}"))


def interval(ratios: Sequence[float], confidence: float) -> Optional[Tuple[float, ...]]:
    """(low, centre, high) of the ratio: the signed-rank interval of the pairs' log ratios,
    symmetric about 0 for two identical loops (swapping the loops' names swaps a pair's two
    rounds), all the test assumes; for normal scatter it needs 2/3 of the pairs the sign
    test does for as narrow an interval. None when too few."""
    ci = iterstats.centre_interval([math.log(x) for x in ratios], confidence)
    return tuple(math.exp(x) for x in ci) if ci else None


def paired_ratios(harness: Sequence[float], bare: Sequence[float]) -> List[float]:
    """The geometric mean of harness / bare of each two rounds, one with each loop first: a
    shared machine's drift and what running first does to a loop cancel in it."""
    r = [h / b for h, b in zip(harness, bare) if b > 0 and h > 0]
    return [math.sqrt(r[2 * j] * r[2 * j + 1]) for j in range(len(r) // 2)]


def rounds_needed(ratios: Sequence[float], lo: float, hi: float, r: float, tolerance: float,
                  fail_side: bool) -> Optional[float]:
    """Rounds after which the interval, narrowing as 1/sqrt(pairs), would no longer straddle the
    tolerance (None past MOST_ROUNDS); on the FAIL side the 99.9% one, 3.29/1.96 as wide."""
    width = max(math.log(hi / r), math.log(r / lo)) * (3.291 / 1.960 if fail_side else 1)
    gap = min(abs(math.log(r / (1 + tolerance))), abs(math.log(r / (1 - tolerance))))
    pairs = math.ceil(len(ratios) * (width / gap) ** 2) if gap > 0 else math.inf
    return 2 * max(pairs, len(ratios) + 1) if 2 * pairs <= MOST_ROUNDS else None


def per_call(harness_cost: Optional[float], gpu_launch: Optional[float], bound_size: Optional[int],
             smallest: int) -> Dict[str, Any]:
    """The per-call cost: GPUs the launch of one call, CPUs the harness over the bare loop."""
    if gpu_launch is None:
        cost, what = harness_cost, "mpibench's loop over the bare loop per call"
        where = ("CPUs: the difference of two loops, as noisy as they are"
                 + (" (below 0 here: the noise exceeds the cost)" if cost is not None and cost < 0
                    else "") + "; launch-bound rows are a GPU matter (-G)")
    else:
        cost, what = gpu_launch, "host launch per call (N calls, no wait)"
        where = (f"launch-bound up to {format_size(bound_size)} (there -G is the fair comparison "
                 f"with nccl-tests)" if bound_size else f"no row launch-bound from {format_size(smallest)}")
    fig = "n/a" if cost is None else f"{us(cost)} us"
    return check("per-call cost", fig, what, None, "INFO", where)


def correctness(rows: Sequence[Mapping[str, Any]], wrong: int, label: str) -> Dict[str, Any]:
    modes = sum(1 for r in rows for k in ("out_of_place", "in_place")
                if r.get(k) and r[k]["nwrong"] is not None)
    names = len({r["collective"] for r in rows})
    judged = partial(check, label, f"{names} collectives, {modes} checked calls, {wrong} wrong",
                     "0 wrong", None)
    if wrong:
        return judged("FAIL", f"{wrong} wrong elements: see the JSON rows' per_rank_nwrong")
    return judged("n/a", "no call could be checked") if not modes else judged("PASS")


def ring_only(backend: str, nccl_algo: Optional[str]) -> bool:
    """Whether all_reduce is known to run as a flat ring: gloo's, or NCCL's with NCCL_ALGO ring."""
    if backend == "gloo":
        return True
    for part in (nccl_algo or "").lower().replace(" ", "").split(";") if backend == "nccl" else []:
        coll, _, algos = part.rpartition(":")
        if coll in ("", "allreduce"):
            return algos == "ring"
    return False


def plausibility(size: int, busbw_GBps: Optional[float], rates: Mapping[str, Optional[float]],
                 timer_failed_short: bool, ranks: int = 2, ring: bool = True) -> Dict[str, Any]:
    """The largest size's busbw against the slowest host's link rates (Gbit/s per host,
    None where unknown). A ring's busbw is at most the links' rate (busbw counts the
    2(n-1)/n it moves through them); hierarchical algorithms move 2(h-1)/h over h hosts'
    links and in-network reduction each host's data once each way, so where the algorithm
    is not known to be ring, busbw above the links is INFO up to 2(n-1)/n x them."""
    name = f"plausibility {format_size(size)}"
    gbit = busbw_GBps * 8 if busbw_GBps else None
    fig = "n/a" if gbit is None else f"busbw {gbit:.3f} Gbit/s"
    known = {h: r for h, r in rates.items() if r}
    unjudged = partial(check, name, fig, "n/a", None, "n/a")
    if len(rates) < 2:
        return unjudged("one host: its ranks share memory (or NVLink), no link rate bounds it")
    if not known or gbit is None:
        return unjudged("the hosts report no link rate (doctor shows what they report)"
                        if not known else "busbw is not defined")
    host = min(known, key=lambda h: known[h])
    ratio = gbit / known[host]
    judged = partial(check, name, fig, f"{known[host]:g} Gbit/s ({host}: all its links)", ratio)
    if ratio <= 1:
        return judged("PASS")
    hosts = len(rates)
    tree = (ranks - 1) * hosts / (ranks * (hosts - 1))
    in_network = 2 * (ranks - 1) / ranks
    if not ring and ratio <= in_network:        # in_network >= tree for 2 hosts or more
        return judged("INFO",
                      f"busbw is {ratio:.2f}x the links, which only a ring bounds: the algorithm "
                      f"is not known to be ring (NCCL_ALGO=Ring makes it so); {ranks} ranks on "
                      f"{hosts} hosts allow up to {tree:.3f}x for tree or NVLS and "
                      f"{in_network:.3f}x with in-network reduction (CollNet/SHARP)")
    cause = ("mpibench's timer stopped early: its loop took less time than the bare loop's"
             if timer_failed_short else
             "the byte count (size or busbw factor) is wrong: both timers agree on the time")
    bound = "the physical rate" if ring else \
        f"the physical rate, beyond what any algorithm can ({in_network:.3f}x)"
    return judged("FAIL", f"busbw is {ratio:.2f}x {bound}: {cause}")


def iperf_share(pair: Mapping[str, Any], size: int, busbw_GBps: Optional[float], backend: str,
                floor: float) -> Dict[str, Any]:
    """The backend's busbw at size beside iperf3's TCP rate between two hosts."""
    name = f"iperf3 {pair['client']}->{pair['server']}"
    gbit = busbw_GBps * 8 if busbw_GBps else None
    fig = "n/a" if gbit is None else f"{backend} busbw {gbit:.3f} Gbit/s at {format_size(size)}"
    if pair["error"]:
        return check(name, fig, "n/a", None, "n/a", pair["error"])
    rate = pair["bits_per_second"] / 1e9
    ref = f"iperf3 {rate:.3f} Gbit/s"
    if gbit is None:
        return check(name, fig, ref, None, "n/a", "busbw is not defined")
    share = gbit / rate
    judged = partial(check, name, fig, ref, share)
    if backend == "nccl":
        return judged("INFO", "NCCL uses RDMA where it can: TCP's rate bounds only NCCL over "
                      "sockets (NCCL_IB_DISABLE=1)")
    if share < floor:
        return judged("LOW", f"{backend} reaches {share:.2f} of the TCP rate (floor {floor:g}); "
                      f"try {KNOBS_TCP}")
    return judged("PASS")


def peer_rows(mine: Sequence[Mapping[str, Any]], theirs: Sequence[Mapping[str, Any]], tool: str, floor: float,
              judged_from: int) -> List[Dict[str, Any]]:
    """mpibench's busbw over the peer's per size and mode; sizes below judged_from are shown,
    not judged (latency: Python's per-call cost against C's)."""
    out, by_size = [], {r["size"]: r for r in theirs}
    for row in mine:
        for mode in ("out_of_place", "in_place"):
            ours, peer = (m and (m["busbw_GBps"] or m["algbw_GBps"])
                          for m in (row.get(mode), by_size.get(row["size"], {}).get(mode)))
            if not ours or not peer:
                continue
            ratio = ours / peer
            judged = partial(check, f"{tool} {row['collective']} {format_size(row['size'])} "
                             f"{mode.replace('_', '-')}", f"mpibench {ours:.4g} GB/s",
                             f"{tool} {peer:.4g} GB/s", ratio)
            if row["size"] < judged_from:
                out.append(judged("INFO"))
            elif ratio < floor:
                out.append(judged("LOW", f"mpibench measures {ratio:.2f} of {tool}'s figure (floor "
                                  f"{floor:g}); try {KNOBS_PEER}"))
            elif ratio > 1 / floor:
                out.append(judged("HIGH", f"mpibench measures {ratio:.2f}x {tool}'s figure: the "
                                  f"tools drive the library differently here, or one side's timer "
                                  f"or byte count is wrong (the plausibility check says whether "
                                  f"mpibench's figure is possible)"))
            else:
                out.append(judged("PASS"))
    return out


def failed(checks: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [c for c in checks if c["verdict"] in ("FAIL", "LOW")]

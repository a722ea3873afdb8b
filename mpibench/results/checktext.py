"""`check`'s words and CSV, from what diagnose/checkjudge.py records in the document's check."""
import math
from statistics import median
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..measure.sizes import format_size
from .files import csv_lines
from .numbers import counted, figure, share_text
from .tables import commented


SKIPPED = {1: "# 1. inside each host: skipped, one rank per host",
           2: "# 2. between hosts: skipped, the job has one host"}


def bw(value: Optional[float]) -> str:
    """A busbw in GB/s as check prints it ('n/a' where there is none)."""
    return figure(None if isinstance(value, float) and math.isnan(value) else value)


def limit_text(lim: Mapping[str, Any]) -> str:
    """'min_busbw_GBps 40 (--expect FILE)': a test's limits and where they come from."""
    return ", ".join(f"{k} {v:.4g}" for k, v in lim.items() if k != "source") + f" ({lim['source']})"


def pair_rate(rate_a: Optional[float], rate_b: Optional[float]) -> Optional[float]:
    """The slower known line rate of two hosts (None when neither reports one)."""
    return min((x for x in (rate_a, rate_b) if x), default=None)


def header_line(collective: str, size: int, hosts: int, ppn: int, iters: int, warmup: int) -> str:
    return (f"# mpibench check: {collective} at {format_size(size)}, "
            f"{counted(hosts, 'host')} x {counted(ppn, 'rank')}, "
            f"{iters} timed calls after {warmup} warm-up per test")


def threshold_lines(tests: Sequence[str], limits: Mapping[str, Optional[Mapping[str, Any]]], ppn: int,
                    relative: float) -> List[str]:
    """One line per test: its limits, or the relative threshold it gets without them."""
    pair = ("pair" if ppn == 1 else "rail of a pair") + " in round 1"
    return [f"# threshold {test}: " + (
        limit_text(lim) if (lim := limits.get(test)) else
        "none (give --expect or --baseline to judge it)" if test == "job" else
        f"relative: below {relative:g} of the median {pair if test == 'pair' else 'host'}")
        for test in tests]


def intra_line(collective: str, ppn: int, busbws: Sequence[float], suspects: Mapping[str, str]) -> str:
    """Test 1's line; suspects {host: why it missed}, each measured again next."""
    return (f"# 1. inside each host: {collective} among its {ppn} ranks, all hosts "
            f"at once; median busbw {median(busbws):.3f} GB/s"
            + "".join(f"; {h} below its floor, measured again: {why}" for h, why in suspects.items()))


def round_line(k: int, pairs: Sequence[Tuple[str, str, Sequence[Dict[str, Any]], Sequence[int],
                                             Optional[float]]], ppn: int, seconds: float) -> str:
    """One round: pairs [(host a, host b, [figure per rail], [failed rails], line rate)], 8 named."""
    lines = [f"{ha}-{hb} " + "|".join(f"{f['busbw_GBps']:.3f}" for f in per)
             + share_text(min(f["busbw_GBps"] for f in per), rate)
             + ("" if not bad else " FAIL" if ppn == 1 else f" FAIL rail {','.join(map(str, bad))}")
             for ha, hb, per, bad, rate in pairs]
    return (f"# 2. between hosts, round {k}: {counted(len(pairs), 'pair')}"
            + (f" x {ppn} rails" if ppn > 1 else "")
            + " at once, busbw GB/s: " + ", ".join(lines[:8])
            + (f", ... ({len(lines) - 8} more)" if len(lines) > 8 else "")
            + f" ({seconds:.2f} s)")


def spread_text(fig: Mapping[str, Any]) -> str:
    """', spread +-12%': the spread of a figure's per-call times, where measured."""
    return f", spread +-{fig['spread_pct']:.0f}%" if fig.get("spread_pct") is not None else ""


def retest_text(where: str, fig: Mapping[str, Any], lim: Optional[Mapping[str, Any]], outcome: str) -> str:
    """'h2 alone: busbw 0.452 GB/s, ..., against min_busbw_GBps 0.37 (...): passed'."""
    return (f"{where}: busbw {bw(fig['busbw_GBps'])} GB/s, {fig['time_us']:.1f} us per call"
            + spread_text(fig) + (f", against {limit_text(lim)}" if lim else "") + f": {outcome}")


def retest_lines(test: int, lines: Sequence[str]) -> List[str]:
    """The lines of a test's retest ('# 1. retest: h2 alone: ...')."""
    return [f"# {test}. retest: {line}" for line in lines]


def job_line(collective: str, n: int, fig: Mapping[str, Any], failed: Optional[str]) -> str:
    return (f"# 3. the whole job: {collective} over {counted(n, 'rank')}, "
            + (f"busbw {fig['busbw_GBps']:.3f} GB/s" if fig["busbw_GBps"] is not None
               else "busbw n/a (not defined for one rank)")
            + f", {fig['time_us']:.1f} us per call" + spread_text(fig)
            + (f": below its limit, measured again: {failed}" if failed else ""))


def host_table(hosts: Sequence[Dict[str, Any]]) -> List[str]:
    """The table of check.hosts: ranks, intra busbw, busbw with each partner, verdict, reasons."""
    rate = {e["host"]: e["line_rate_gbps"] for e in hosts}
    rows = []
    for e in hosts:
        intra = "-" if e["intra"] is None else bw(e["intra"]["busbw_GBps"])
        by: Dict[Tuple[int, str], List[Dict[str, Any]]] = {}
        for p in e["pairs"]:            # one entry per partner, its rails joined by |
            by.setdefault((p["round"], p["partner"]), []).append(p)
        partners = ", ".join(
            f"{other} " + "|".join(bw(p["busbw_GBps"]) for p in ps)
            + share_text(min(p["busbw_GBps"] or 0 for p in ps), pair_rate(rate[e["host"]], rate[other]))
            for (_, other), ps in by.items()) or "-"
        rows.append([e["host"], len(e["ranks"]), intra, partners, e["verdict"],
                     "; ".join(e["reasons"]) or "-"])
    return ["#"] + commented(rows, ["host", "ranks", "intra busbw", "busbw with each partner "
                                    "(% of line rate)", "verdict", "reason"])


def verdict_lines(hosts: int, warnings: Sequence[Tuple[str, str]], transient: Sequence[Dict[str, str]],
                  failing: Sequence[str], hostlist: str, suspects: Sequence[str]) -> List[str]:
    """The closing lines: warnings (host, what: 'its counters moved: ...'), transient misses, the
    hosts to drain (scontrol), suspect links."""
    out = ["#"]
    out += [f"# WARNING {h} passed, but {what}" for h, what in warnings]
    out += [f"# TRANSIENT {t['what']}: at first {t['first']}; then {t['again']}; nobody drained "
            f"for it" for t in transient]
    if failing:
        out += [f"# FAILING HOSTS ({len(failing)} of {hosts}): {hostlist}",
                f'scontrol update NodeName={hostlist} State=DRAIN Reason="mpibench check failed"']
    else:
        out.append(f"# every host passed ({hosts})" if not suspects else
                   f"# no host to drain ({hosts} hosts): only the links and switches below are suspect")
    if suspects:
        out.append(f"# SUSPECT LINKS AND SWITCHES ({len(suspects)}, for the fabric team): "
                   + "; ".join(suspects))
    return out


def csv(doc: Dict[str, Any]) -> str:
    """The --csv file: one line per host and partner rail (one for a host without pairs)."""
    lines: List[List[Any]] = [["host", "ranks", "intra_busbw_GBps", "partner", "round", "rail",
              "pair_busbw_GBps", "line_rate_gbps", "verdict", "reason"]]
    for e in (doc.get("check") or {}).get("hosts", []):
        intra = "" if e["intra"] is None else e["intra"]["busbw_GBps"]
        for p in e["pairs"] or [None]:
            pair = [p["partner"], p["round"], p.get("rail", 0), p["busbw_GBps"]] if p else [""] * 4
            lines.append([e["host"], len(e["ranks"]), intra, *pair, e["line_rate_gbps"] or "",
                          e["verdict"], "; ".join(e["reasons"])])
    return "".join(csv_lines(lines))

"""What the link measurements print (run's link check, p2p): the matrices, the slow links and hosts."""
import argparse
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..measure.sizes import format_size
from .numbers import counted, figure
from .output import RunOutput
from .tables import commented

Matrix = Sequence[Sequence[Optional[float]]]


def intro(out: RunOutput, size: int, nrounds: int, iters: int) -> None:
    out.say(f"#\n# links between hosts at {format_size(size)}: one rank per host, "
            f"{counted(nrounds, 'round')} of pairs, {iters} transfers each way after a barrier (a "
            f"slow link makes every rank of a collective equally slow; pairs show which it is):")


def p2p_header(out: RunOutput, args: argparse.Namespace, *, nranks: int, nhosts: int, backend: str,
               launcher: str, size: int, rounds: Sequence[Sequence[Any]]) -> None:
    who = "every rank" if args.every_rank else "one rank per host, the lowest on each"
    out.say(f"# mpibench p2p: {nranks} ranks on {counted(nhosts, 'host')} take part ({who}), "
            f"backend {backend}, launcher {launcher}")
    out.say(f"# bandwidth at {format_size(size)}: {args.iters} transfers per link after "
            f"{counted(args.warmup, 'warm-up')}, each after a barrier, "
            + ("both ranks sending at once (bytes both ways / time)" if args.bidirectional
               else "one direction at a time (row sends to column)"))
    out.say(f"# latency at {format_size(args.latency_size)}: half the round trip of "
            f"{args.latency_iters} ping-pongs")
    out.say(f"# schedule: {counted(sum(map(len, rounds)), 'pair')} in {counted(len(rounds), 'round')}, "
            f"no host in two pairs at once; ranks not in a pair wait at an MPI barrier")


def heatmap(out: RunOutput, png: Optional[str], when: str = ":") -> None:
    if png:
        out.say(f"# heatmap{when} {png}")


def matrices(out: RunOutput, names: List[str], size: int, bidirectional: bool, bandwidth: Optional[Matrix],
             latency_size: int, latency: Optional[Matrix]) -> None:
    """The bandwidth matrix (GB/s) and the latency one (us), each unless None."""
    way = ("(both ways at once)", "GB/s") if bidirectional else ("(row sends to column)", "from \\ to")
    for matrix, title, corner, digits in (
            (bandwidth, f"bandwidth GB/s at {format_size(size)} {way[0]}", way[1], 3),
            (latency, f"latency us at {format_size(latency_size)} (one way, half the round trip)", "us", 1)):
        if matrix is not None:
            rows = [[a] + ["-" if a == b else figure(v, f".{digits}f", missing="-")
                           for b, v in zip(names, row)] for a, row in zip(names, matrix)]
            out.say(f"#\n# {title}:", *commented(rows, [corner] + names, stralign="right"))


def verdict(out: RunOutput, analysis: Dict[str, Any], hosts: Sequence[str], labels: Sequence[str],
            bw: Dict[Tuple[int, int], Optional[float]], moved: float) -> None:
    """The named links and hosts, one line each, or one line saying none is slow."""
    pct = int(round(analysis["threshold"] * 100))
    k = analysis["iterations"]
    lines = ["#"]
    if analysis.get("reference_s"):
        lines.append(f"# reference: the median link between hosts not found slow, "
                     f"{moved / analysis['reference_s'] / 1e9:.3f} GB/s")
    verdicts = {(x["from"], x["to"]): x for x in analysis["links"]}
    explained = set()
    for h in analysis["slow_hosts"]:
        v = next(x for x in analysis["hosts"] if x["host"] == h)
        lines.append(f"# SLOW HOST {h}: its links run at {1 / v['ratio']:.2f}x the links "
                     f"between other hosts, below {pct}% in {v['slow_iterations']} of {k} iterations")
        mine = [key for key in analysis["slow_links"] if h in (hosts[key[0]], hosts[key[1]])]
        explained.update(mine)
        if mine:
            lines.append("#   its slow links (GB/s): " + ", ".join(
                f"{labels[a]} -> {labels[b]} {bw[(a, b)]:.3f}" for a, b in mine))
    for a, b in [link for link in analysis["slow_links"] if link not in explained]:
        v = verdicts[(a, b)]
        lines.append(f"# SLOW LINK {labels[a]} -> {labels[b]}: {bw[(a, b)]:.3f} GB/s, "
                     f"{1 / v['ratio']:.2f}x the reference, below {pct}% of it in "
                     f"{v['slow_iterations']} of {k} iterations")
    if not analysis["slow_links"] and not analysis["slow_hosts"]:
        lines.append(f"# no link or host is consistently below {pct}% of the others ({k} iterations each)")
    if analysis["note"]:
        lines.append(f"# note: {analysis['note']}")
    out.say(*lines)

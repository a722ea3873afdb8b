"""Text output: nccl-tests' row format, and the per-host tables it lacks."""
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from tabulate import tabulate

from ..measure.collectives.base import algbw, busbw
from ..measure.modes import MODES, ModeKey
from ..measure.row import Figures
from ..measure.sizes import format_size
from .numbers import figure, ratio, us
from .schema import HostAnalysis, HostEntry, HostFigures, RankFigures


def fnum(value: Optional[float], width: int) -> str:
    """nccl-tests 2.19.6's getFloatStr (src/util.cu): 2 decimals if they fit the width, else
    1, else none, else an exponent. Judged on the printed text, so a value that rounds up
    (999.996 -> 1000.00) takes fewer decimals and never overflows its column."""
    if value is None:
        return "n/a".rjust(width)
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return (("%*.1e" if width >= 7 else "%*.0e") % (width, value))[:width]


def measured(rows: Iterable[Dict[str, Any]]) -> List[Tuple[Dict[str, Any], ModeKey, Figures]]:
    """(row, mode key, its figures) of every mode measured in rows, in order."""
    return [(row, k, m) for row in rows for k in MODES for m in [row.get(k)] if m]


def row_header(per_iter: bool = False, max_error: bool = False) -> str:
    """nccl-tests' header (per_iter: -I 1's i_* after each mode; max_error: logs before 2.13),
    then each mode's rank spread, after nccl-tests' own columns so that they keep their places."""
    mode = "  %7s  %6s  %6s  %6s"
    names = ["time", "algbw", "busbw", "error" if max_error and not per_iter else "#wrong"]
    units = ["(us)", "(GB/s)", "(GB/s)", ""]
    title = "#" + " " * 58 + "out-of-place" + " " * 23 + "in-place" + " " * 19
    if per_iter:
        mode += "  %7s  %7s  %7s  %7s"
        title = "#" + " " * 65 + "out-of-place (+ per-iteration)" + " " * 32 + \
            "in-place (+ per-iteration)" + " " * 32
        names += ["i_min", "i_max", "i_p99", "i_cv%"]
        units += ["(us)", "(us)", "(us)", "(%)"]
    line = "# %10s  %12s  %8s  %6s  %6s" + mode + mode + "  %6s  %6s"
    return "\n".join([
        title + "rank spread",
        line % ("size", "count", "type", "redop", "root", *names, *names, "out", "in"),
        line % ("(B)", "(elements)", "", "", "", *units, *units, "(%)", "(%)"),
    ])


def spread_pct(row: Dict[str, Any], key: ModeKey) -> Optional[float]:
    """(slowest rank - fastest rank) / mean rank of a mode's times, in percent (None: unknown)."""
    times = (row.get("per_rank_time_us") or {}).get(key)
    if not row.get(key) or not times:
        return None
    avg = sum(times) / len(times)
    return (max(times) - min(times)) / avg * 100 if avg > 0 else None


def _mode_values(m: Optional[Figures]) -> Tuple[str, str, str, str]:
    """time, algbw, busbw, #wrong of one mode, as nccl-tests writes them (n/a: not measured)."""
    if m is None:
        return ("n/a", "", "", "")
    logged: Mapping[str, Any] = m               # a log's figures may hold more than Figures
    if logged.get("max_error") is not None:     # before nccl-tests 2.13: the largest error
        wrong = "%.0e" % logged["max_error"]
    else:
        wrong = "N/A" if m["nwrong"] is None else "%g" % m["nwrong"]
    return (fnum(m["time_us"], 7), fnum(m["algbw_GBps"], 6), fnum(m["busbw_GBps"], 6), wrong)


ROW_HEADERS = ["size (B)", "count", "type", "redop", "root",
               "out time (us)", "out algbw (GB/s)", "out busbw (GB/s)", "out #wrong",
               "in time (us)", "in algbw (GB/s)", "in busbw (GB/s)", "in #wrong",
               "out rank spread (%)", "in rank spread (%)"]


def cells(row: Dict[str, Any], per_iter: bool = False) -> List[Tuple[int, str]]:
    """(width, text) of each cell of row_line, right-aligned in it (stripped in markdown)."""
    cells = list(zip((10, 12, 8, 6, 6), (str(row[k]) for k in ("size", "count", "type", "redop", "root"))))
    for m in (row[key] for key in MODES):
        cells += zip((7, 6, 6, 6), _mode_values(m))
        p = m.get("per_iter") if m else None        # -I 1's i_min, i_max, i_p99, i_cv%
        if per_iter:
            cells += zip((7,) * 4, [fnum(p[k], 7) for k in ("min_us", "max_us", "p99_us", "cv_pct")]
                         if p else ("",) * 4)
    return cells + [(6, "-" if p is None else "%6.1f" % p) for p in (spread_pct(row, k) for k in MODES)]


def row_line(row: Dict[str, Any], per_iter: bool = False) -> str:
    return "".join("  " + text.rjust(width) for width, text in cells(row, per_iter))


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain table, its cells printed as given."""
    return str(tabulate(rows, headers=headers, disable_numparse=True))


def commented(rows: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str = "simple",
              numparse: bool = False, **options: Any) -> List[str]:
    """A table as lines after '#  ' (another format: one block), cells as given unless numparse."""
    text = tabulate(rows, headers=headers, tablefmt=fmt, disable_numparse=not numparse, **options)
    return ["#  " + line for line in text.splitlines()] if fmt == "simple" else [text]


def host_cells(h: HostFigures, time: Callable[[float], str]) -> List[Any]:
    """A host's name, ranks, and min, median and max of its ranks' times as time() writes them."""
    return [h["host"], ",".join(str(r) for r in h["ranks"]), time(h["min_s"]),
            time(h["median_s"]), time(h["max_s"])]


def slow_host_lines(analysis: HostAnalysis, unit: str) -> List[str]:
    """A line per consistently slow host and slower one of a pair; unit: iterations or steps."""
    slow = [h for name in analysis["slow_hosts"] for h in analysis["hosts"] if h["host"] == name]
    return [f"# SLOW HOST {h['host']}: more than {_over(analysis, h)} the median host in "
            f"{h['slow_iterations']} of {analysis['iterations']} {unit} ({h['ratio']:.2f}x)"
            for h in slow] + pair_lines(analysis, unit)


def _over(analysis: HostAnalysis, member: Union[HostFigures, RankFigures]) -> str:
    """What a slow one exceeded: the margin, or its peers' scatter where that was wider."""
    pct = int(round(analysis["margin"] * 100))
    limit = member.get("threshold", 1 + analysis["margin"])
    return (f"{pct}% over" if limit <= 1 + analysis["margin"] + 1e-9 else
            f"{limit:.2f}x (its peers' own scatter, wider than {pct}%),")


def pair_lines(analysis: HostAnalysis, unit: str) -> List[str]:
    """Two hosts or two ranks, one consistently slower: which is slow, nothing here says."""
    return [f"# {p['what']} {p['slower']} took {p['ratio']:.2f}x {p['what']} {p['faster']}'s "
            f"time in {p['slow_iterations']} of {analysis['iterations']} {unit}: with two "
            f"{p['what']}s a relative threshold cannot say which one is slow (a third "
            f"{p['what']} or an absolute floor, check --expect, would)"
            for p in analysis.get("pairs", [])]


def host_section(entry: HostEntry, fmt: str = "simple") -> List[str]:
    """The per-host table of a probe entry (several hosts), and the hosts and ranks found slow."""
    lines, several = [], len(entry["hosts"]) > 1
    if several:
        mode = "in" if entry["mode"] == "in" else "out-of"
        lines = [f"#\n# {entry['collective']} per host at {format_size(entry['size'])} "
                 f"({entry.get('dtype', entry['type'])}, {mode}-place, {entry['iterations']} "
                 f"iterations, each after a barrier):"]
        # no bw_bytes raises TypeError: report names the entry malformed
        rows = [host_cells(h, us) + [figure(busbw(algbw(entry["bw_bytes"], h["max_s"]),  # type: ignore[arg-type]
                                                  entry["busbw_factor"])), ratio(h["ratio"])]
                for h in entry["hosts"]]
        lines += commented(rows, ["host", "ranks", "min us", "median us", "max us",
                                  "busbw GB/s (slowest)", "vs median host"], fmt, numparse=True)
    if not entry["symmetric"]:
        return lines + (["# (ranks differ by their place in this collective, its root or the "
                         "neighbour each receives from, so no rank is called slow)"] if several else [])
    k = entry["iterations"]
    if several:
        lines += slow_host_lines(entry, "iterations")
        if not entry["slow_hosts"] and not entry.get("pairs"):
            lines.append(f"# no host is consistently slow (>{int(round(entry['margin'] * 100))}% "
                         f"over the median host in most of {k} iterations)")
    elif entry.get("pairs"):
        lines += pair_lines(entry, "iterations")
    mid = entry["median_rank_s"]
    for r in entry["slow_ranks"]:
        x = entry["ranks"][r]
        vs = f", {x['median_s'] / mid:.2f}x the median rank ({us(mid)} us)" if mid > 0 else ""
        lines.append(f"# SLOW RANK {r} (host {x['host']}) at {format_size(entry['size'])}: "
                     f"{us(x['median_s'])} us{vs}, more than {_over(entry, x)} the median "
                     f"rank in {x['slow_iterations']} of {k} iterations")
    return lines


def trials_table(rows: Sequence[Dict[str, Any]], fmt: str = "simple") -> List[str]:
    """Per row and mode of run --trials: the time's median, range and cv, busbw, stability."""
    out = []
    for row, key, m in [x for x in measured(rows) if "spread" in x[2]]:
        sp = m["spread"]
        bw = "n/a" if sp["busbw_GBps_min"] is None else \
            f"{sp['busbw_GBps_min']:.3f}-{sp['busbw_GBps_max']:.3f}"
        out.append([row["collective"], row["size"], row["type"], row["redop"],
                    key.replace("_", "-"), f"{m['time_us']:.1f}", f"{sp['time_us_min']:.1f}",
                    f"{sp['time_us_max']:.1f}", figure(sp["cv"] and sp["cv"] * 100, ".1f"),
                    figure(m["busbw_GBps"]), bw, "UNSTABLE" if m["unstable"] else "stable"])
    return commented(out, ["collective", "size", "type", "redop", "mode", "time us", "min", "max",
                           "cv %", "busbw GB/s", "busbw min-max", "trials"], fmt)

"""mpibench plot: busbw against size from saved results, and a file's `p2p` entry (what
`mpibench p2p` writes; its shape in docs/commands/plot.md) as heatmaps."""
import argparse
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Set, Tuple, Union, cast

from ..analysis import heatmap
from ..errors import UsageError
from ..measure.sizes import format_size
from ..results import plottext, reader
from ..results.document import finite
from ..results.files import ResultFile
from ..results.schema import Doc
from .common import options

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

HELP = "draw busbw against size (and a p2p matrix) from saved results into a PNG"
SESSION = "offline"
Parts = Tuple[str, ...]                     # a line's label parts: file, backend, setting, ...
Point = Tuple[int, float, float, float]     # size, value, low, high
Matrix = Tuple[str, str, List[List[Optional[float]]], Optional[int], str]   # title, unit, rows, size, cmap
METRICS = {"busbw": ("busbw_GBps", "busbw (GB/s)"), "algbw": ("algbw_GBps", "algbw (GB/s)"),
           "time": ("time_us", "time (us)")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="results JSON files")
    p.add_argument("--png", required=True, metavar="PATH", help="the picture to write")
    p.add_argument("--metric", choices=tuple(METRICS), default="busbw",
                   help="what the y axis shows (default busbw)")
    p.add_argument("--mode", choices=("both", "out", "in"), default="both",
                   help="out-of-place, in-place or both (default both)")
    p.add_argument("--collectives", default=None, metavar="LIST",
                   help="only these collectives (comma-separated)")
    p.add_argument("--logy", action="store_true", help="log scale on the y axis too")
    p.add_argument("--title", default=None, help="title above the panels")
    options.add_log_options(p)


def series(named_docs: Sequence[Tuple[str, Doc]], metric: str, modes: Sequence[str], only: Optional[Set[str]]
           ) -> Tuple[Dict[str, Dict[Parts, List[Point]]], List[Tuple[str, Any]]]:
    """{collective: {label parts: [(size, value, low, high)]}} and the p2p entries."""
    field = METRICS[metric][0]
    out: Dict[str, Dict[Parts, List[Point]]] = {}
    p2p: List[Tuple[str, Any]] = []
    for name, doc in named_docs:
        for row in doc["results"]:
            if only and row["collective"] not in only:
                continue
            for mode in modes:
                m = row.get(mode)
                if not m or m.get(field) is None:
                    continue
                value = low = high = m[field]
                sp = m.get("spread")
                if sp and field == "time_us":
                    low, high = sp["time_us_min"], sp["time_us_max"]
                elif sp:    # a bandwidth is the bytes over the time
                    low, high = (value * m["time_us"] / sp[k] for k in ("time_us_max", "time_us_min"))
                parts = (name, row.get("backend", ""), row.get("setting", ""),
                         row.get("dtype", row["type"]), row["redop"],
                         mode.replace("_", "-"), f"test {row['test']}" if "test" in row else "")
                out.setdefault(row["collective"], {}).setdefault(parts, []).append(
                    (row["size"], value, low, high))
        entries = doc.get("p2p")
        p2p += [(name, e) for e in (entries if isinstance(entries, list) else [entries] if entries else [])]
    return out, p2p


def labels(all_parts: Sequence[Parts], with_file: bool) -> Dict[Parts, str]:
    """Each line's label: the parts that differ between a panel's lines (and its file, if several)."""
    varying = [i for i in range(7) if (i == 0 and with_file) or
               len({p[i] for p in all_parts}) > 1] or [0]
    return {p: " ".join(str(p[i]) for i in varying if p[i] not in ("", "none")) or p[0]
            for p in all_parts}


# matrix key -> (title, unit, the key of its message size, colour map: bright = good)
MATRICES = {"bandwidth_GBps": ("bandwidth", "GB/s", "size", "viridis"),
            "latency_us": ("latency", "us", "latency_size", "viridis_r"),
            "matrix": ("p2p", None, "size", "viridis")}


def matrices(entry: Any) -> Union[List[Matrix], str]:
    """[(title, unit, rows)] of a p2p entry, or a string saying what is wrong with it."""
    if not isinstance(entry, dict):
        return "not an object"
    hosts = _names(entry.get("hosts"))
    if hosts is None:
        return "no 'hosts' list of names"
    n = len(hosts)
    out = []
    for key, (title, unit, size_key, cmap) in MATRICES.items():
        matrix = entry.get(key)
        if matrix is None:
            continue
        if not _square(matrix, n):
            return f"'{key}' is not {n} x {n} numbers (null allowed)"
        out.append(_matrix(entry, matrix, title, unit, size_key, cmap))
    return out or f"no matrix ({', '.join(MATRICES)})"


def _names(hosts: Any) -> Optional[List[str]]:
    """A p2p entry's 'hosts' where it is a list of one or more names, else None."""
    if isinstance(hosts, list) and hosts and all(isinstance(h, str) for h in hosts):
        return hosts
    return None


def _square(matrix: Any, n: int) -> bool:
    """Whether a p2p entry's matrix is n x n numbers (null allowed)."""
    return isinstance(matrix, list) and len(matrix) == n and all(
        isinstance(r, list) and len(r) == n and all(x is None or finite(x) for x in r)
        for r in matrix)


def _matrix(entry: Dict[str, Any], matrix: List[List[Optional[float]]], title: str, unit: Optional[str],
            size_key: str, cmap: str) -> Matrix:
    """One matrix of a p2p entry: (title, unit, rows, message size or None, colour map)."""
    unit = unit or (entry["unit"] if isinstance(entry.get("unit"), str) else "GB/s")
    size = entry.get(size_key)
    return (title, unit, matrix, size if isinstance(size, int) and size > 0 else None, cmap)


def execute(session: None, args: argparse.Namespace) -> int:
    docs = [(path, reader.pick_test(cast(Doc, reader.load(path, args.collective)), path, args.test))
            for path in args.files]
    plottext.tests_note(docs, args.test)
    plt = _matplotlib()
    names = [os.path.basename(p) for p, _ in docs]
    if len(set(names)) < len(names):
        names = [p for p, _ in docs]
    modes = reader.modes(args.mode)
    only = set(args.collectives.split(",")) if args.collectives else None
    lines, p2p = series(list(zip(names, (d for _, d in docs))), args.metric, modes, only)
    good = []
    for name, entry in p2p:
        found = matrices(entry)
        if isinstance(found, str):
            plottext.skipped(name, found)
        else:
            good += [(name, entry, *m) for m in found]
    panels = len(lines) + len(good)
    if not panels:
        raise UsageError("nothing to plot: no rows (for these collectives and modes) and no "
                         "p2p matrix in " + ", ".join(args.files))
    cols = min(panels, 2)
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7.5 * cols, 5 * rows), squeeze=False)
    flat = [ax for r in axes for ax in r]
    for ax, (coll, per) in zip(flat, lines.items()):
        _draw_lines(ax, coll, per, len(docs) > 1, args, plt)
    for ax, (name, entry, title, unit, matrix, size, cmap) in zip(flat[len(lines):], good):
        at = f" at {format_size(size)}" if size else ""
        heatmap.draw_on(fig, ax, entry["hosts"], matrix, f"{title} {unit}{at} ({name})", unit, cmap)
    for ax in flat[panels:]:
        ax.set_visible(False)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    _save(fig, args.png)
    return 0


def _matplotlib() -> ModuleType:
    """pyplot on the Agg backend, or UsageError naming how to install matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plot needs matplotlib: pip install 'mpibench[plot]' "
                         "(or pip install matplotlib)") from None
    return plt


def _draw_lines(ax: "Axes", coll: str, per: Dict[Parts, List[Point]], with_file: bool,
                args: argparse.Namespace, plt: ModuleType) -> None:
    """One collective's panel: a line per series over size, its spread shaded."""
    names_of = labels(list(per), with_file)
    for parts, points in per.items():
        points.sort()
        xs = [p[0] for p in points]
        line, = ax.plot(xs, [p[1] for p in points], marker="o", ms=3, label=names_of[parts])
        if any(p[2] != p[3] for p in points):
            ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points],
                            color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xscale("log", base=2)
    if args.logy:
        ax.set_yscale("log")
    ticks = sorted({p[0] for points in per.values() for p in points})
    step = max(1, len(ticks) // 8)
    ax.set_xticks(ticks[::step], labels=[format_size(t).replace(" ", "")
                                         for t in ticks[::step]], rotation=30)
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlabel("size")
    ax.set_ylabel(METRICS[args.metric][1])
    ax.set_title(coll)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig: "Figure", png: str) -> None:
    """The figure to a fresh name (never overwrites; nothing left behind on failure)."""
    out = ResultFile(png, None)
    try:
        heatmap.save(fig, out.path)
    except BaseException:
        os.unlink(out.path)
        raise
    plottext.wrote(out)

"""The lines that close a run's output, from its document alone: run's as it ends, report's."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import published, reader
from .rows import key as row_key
from .numbers import figure, share_text
from .tables import commented, measured


def _busbws(rows: Sequence[Dict[str, Any]]) -> List[float]:
    return [bw for _, _, m in measured(rows) if (bw := m.get("busbw_GBps")) is not None]


def closing(rows: Sequence[Dict[str, Any]], names: Sequence[str], ranks: Optional[int], wrong: int,
            threshold: Optional[Tuple[float, str]] = None) -> Tuple[Dict[str, Any], List[str]]:
    """(document fields, lines): nccl-tests' closing lines over rows of the backends names.
    threshold: (GB/s, source), as NCCL_TESTS_MIN_BW: each average OK or FAILED (none fails)."""
    lines = ["#", f"# {'Out of bounds values':<20s} : {wrong} {'FAILED' if wrong else 'OK'}"]
    averages, failed = {}, []
    for name in names:
        mine = [row for row in rows if row.get("backend", "?") == name]
        bws = _busbws(mine)
        label = "Avg bus bandwidth" + (f" {name}" if len(names) > 1 else "")
        if bws:
            averages[name] = sum(bws) / len(bws)
        text = (f"{averages[name]:g}" if bws else "n/a (no rows)" if not measured(mine) or ranks != 1
                else "n/a (bus bandwidth is not defined for one rank: its factor is 0 for these collectives)")
        if threshold is not None:
            failed += [] if averages.get(name, 0.0) >= threshold[0] else [name]
            text += " FAILED" if name in failed else " OK"
        lines.append(f"# {label:<20s} : {text}")
    bws = _busbws(rows)
    fields: Dict[str, Any] = {"average_bus_bandwidth": sum(bws) / len(bws) if bws else None,
                              "out_of_bounds": {"count": wrong, "okay": wrong == 0}}
    if len(names) > 1:
        fields["average_bus_bandwidth_by_backend"] = averages
    if threshold is not None:
        lines.append(f"# minimum bus bandwidth {threshold[0]:g} GB/s ({threshold[1]}): "
                     + (f"FAILED ({', '.join(failed)})" if failed else "OK"))
        fields["min_busbw"] = {"GBps": threshold[0], "source": threshold[1], "okay": not failed}
    return fields, lines


def closing_lines(doc: Dict[str, Any]) -> List[str]:
    """closing()'s lines for a saved document."""
    bounds, limit = doc.get("out_of_bounds"), doc.get("min_busbw")
    wrong = bounds["count"] if bounds else \
        int(sum(m.get("nwrong") or 0 for _, _, m in measured(doc["results"])))
    threshold = (limit["GBps"], limit["source"]) if limit else None
    names = list(dict.fromkeys(row.get("backend", "?") for row in doc["results"]))
    lines = closing(doc["results"], names, reader.ranks(doc), wrong, threshold)[1]
    if doc.get("source") and doc["source"] != "mpibench":
        # another tool's log: its own printed average (one per test when it holds several)
        avg = doc.get("average_bus_bandwidth")
        text = "n/a (one per test, above)" if len(reader.tests(doc)) > 1 else figure(avg, "g")
        lines = [x if not x.startswith("# Avg bus bandwidth") else
                 f"# {'Avg bus bandwidth':<20s} : {text}" for x in lines]
    return lines


def comparison(rows: Sequence[Dict[str, Any]], a: str, b: str, memory: Optional[Dict[str, str]] = None
               ) -> Tuple[List[Dict[str, Any]], List[str]]:
    """(compared rows, lines): backends a and b side by side (memory: where their buffers were)."""
    theirs = {row_key(row, m, backend=False): y for row, m, y in measured(rows) if row.get("backend") == b}
    compared, cells = [], []
    for row, m, x in measured(rows):
        y = theirs.get(row_key(row, m, backend=False)) if row.get("backend") == a else None
        if y is None:
            continue
        # Same bytes and factor on both sides: busbw ratio = algbw ratio = time ratio.
        xa, ya = x["algbw_GBps"], y["algbw_GBps"]
        ratio = ya / xa if xa and ya else None
        sides = ((a, x), (b, y))
        compared.append({**{k: row[k] for k in ("collective", "size", "type", "redop")}, "mode": m,
                         **{f"{n}_{k}": f[k] for n, f in sides for k in ("time_us", "busbw_GBps")},
                         "busbw_ratio": ratio})
        cells.append([row["collective"], row["size"], row["type"], row["redop"], m.replace("_", "-"),
                      *(c for _, f in sides for c in (f"{f['time_us']:.1f}", figure(f["busbw_GBps"]))),
                      figure(ratio, ".2f")])
    lines = [f"#\n# {a} vs {b}: busbw ratio {b}/{a} per size (above 1: {b} is faster)"]
    if memory and memory.get(a) != memory.get(b):
        lines.append(f"# {a} moves {memory.get(a)} memory, {b} {memory.get(b)} memory: "
                     f"different data paths, not only different libraries")
    return compared, lines + commented(cells, ["collective", "size", "type", "redop", "mode",
                                               f"{a} us", f"{a} busbw", f"{b} us", f"{b} busbw",
                                               f"{b}/{a}"])


def comparison_lines(doc: Dict[str, Any]) -> List[str]:
    """comparison()'s lines for a saved document that compared two backends (else none)."""
    names = (doc.get("comparison") or {}).get("backends")
    if not (isinstance(names, list) and len(names) == 2):
        return []
    return comparison(doc["results"], names[0], names[1], memory=doc["comparison"].get("memory"))[1]


def line_rate_lines(doc: Dict[str, Any]) -> List[str]:
    """With several hosts: each row's busbw as a share of the slowest line rate the hosts report."""
    rates = doc.get("line_rate_gbps")
    if len(reader.hosts(doc)) < 2 or not rates:
        return []
    known = {h: r for h, r in rates.items() if r}
    if not known:
        return ["#", "# line rate: no host reports one (no active RDMA port, no interface "
                     "speed): busbw is not shown against it"]
    rate = min(known.values())
    slow = [h for h, r in known.items() if r == rate]
    cells = [[row["collective"], row.get("backend", ""), row["size"], row["type"], m.replace("_", "-"),
              f"{bw:.3f}", f"{bw * 8:.2f}", share_text(bw, rate).strip(" ()")]
             for row, m, f in measured(doc["results"]) if (bw := f.get("busbw_GBps")) is not None]
    lines = ["#", f"# busbw against the line rate: {rate:g} Gbit/s, the slowest the hosts report "
                  f"({', '.join(slow)}; each host's fastest active RDMA port, else its fastest interface up)"]
    return lines + commented(cells, ["collective", "backend", "size", "type", "mode",
                                     "busbw GB/s", "busbw Gbit/s", "of line rate"])


def path_limit_lines(doc: Dict[str, Any]) -> List[str]:
    """Each row's busbw as a share of the limit of the path it crossed (doc['path_limits']:
    inside the host with one, between hosts with several; diagnose/pathlimits.py)."""
    paths = doc.get("path_limits")
    if not paths:
        return []
    lim = paths.get("limit")
    if not lim:
        return ["#", f"# share of the path's limit: not shown, the limit is unknown ({paths.get('why')})"]
    cells = [[row["collective"], row.get("backend", ""), row["size"], row["type"], m.replace("_", "-"),
              f"{bw:.3f}", _share(bw / lim["GBps"])]
             for row, m, f in measured(doc["results"]) if (bw := f.get("busbw_GBps")) is not None]
    nhosts = len(paths.get("hosts", {}))
    lines = ["#", f"# busbw against the path's limit: {lim['name']} = {lim['GBps']:.1f} GB/s each way, "
                  f"{'inside the host' if lim['via'] != 'NICs' else 'between hosts'} "
                  f"({lim['host']}{f', the slowest of {nhosts} hosts' if nhosts > 1 else ''})"]
    return lines + commented(cells, ["collective", "backend", "size", "type", "mode", "busbw GB/s",
                                     f"of {lim['name']}"])


def _share(x: float) -> str:
    """A share as a percentage, two digits where it is below 1% (small sizes, CPUs)."""
    return f"{x:.0%}" if x >= 0.01 else f"{100 * x:.2f}%" if x >= 1e-4 else "<0.01%"


def published_lines(doc: Dict[str, Any]) -> List[str]:
    """What others published for the platform, beside each collective's best busbw (doc['published'])."""
    pub = doc.get("published")
    if not pub:
        return []
    lines = ["#"]
    for coll, found in pub["collectives"].items():
        best = max(((f["busbw_GBps"], row["size"]) for row, _, f in measured(doc["results"])
                    if row["collective"] == coll and f.get("busbw_GBps") is not None), default=None)
        lines += ["# " + x for x in published.lines(found, pub["platform"], coll,
                                                     *(best if best else (None, None)))]
    return lines

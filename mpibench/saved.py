"""Saved results files, as report, compare, plot, sweep and predict read them.

load() is the one place a file is read and checked: the commands work on the
document it returns and may trust the fields checked here. A file that is not a
results document (unreadable, not JSON, wrong shapes, NaN, absurdly large) is a
UsageError naming the file, never a traceback.
"""
import json
import math
import os

from .errors import UsageError

MODES = ("out_of_place", "in_place")
MAX_BYTES = 512 << 20


def load(path):
    """The results document in path (a dict with a 'results' list of rows)."""
    try:
        if os.path.getsize(path) > MAX_BYTES:
            raise UsageError(f"{path}: larger than {MAX_BYTES >> 20} MiB, not a results file")
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=_no_constant)
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    problem = _problem(doc)
    if problem:
        raise UsageError(f"{path}: not an mpibench results file: {problem}")
    return doc


def _no_constant(name):
    raise ValueError(f"{name} is not a number")


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _problem(doc):
    if not isinstance(doc, dict):
        return "the top level is not an object"
    rows = doc.get("results")
    if not isinstance(rows, list):
        return "no 'results' list"
    world = doc.get("world")
    if world is not None and not (isinstance(world, dict) and _int(world.get("size"))
                                  and world["size"] > 0):
        return "'world' has no positive 'size'"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"results[{i}] is not an object"
        for key in ("collective", "type", "redop"):
            if not isinstance(row.get(key), str):
                return f"results[{i}] has no text '{key}'"
        for key in ("size", "count", "root"):
            if not _int(row.get(key)):
                return f"results[{i}] has no whole-number '{key}'"
        for key in ("backend", "setting"):
            if key in row and not isinstance(row[key], str):
                return f"results[{i}].{key} is not text"
        for key in ("bw_bytes", "busbw_factor"):
            if key in row and not _num(row[key]):
                return f"results[{i}].{key} is not a number"
        for mode in MODES:
            m = row.get(mode)
            if m is None:
                continue
            if not isinstance(m, dict) or not _num(m.get("time_us")) or m["time_us"] <= 0:
                return f"results[{i}].{mode} has no positive 'time_us'"
            for key in ("algbw_GBps", "busbw_GBps"):
                if m.get(key) is not None and not _num(m[key]):
                    return f"results[{i}].{mode}.{key} is not a number"
            sp = m.get("spread")
            if sp is not None and not (isinstance(sp, dict) and all(
                    sp.get(k) is None or _num(sp[k]) for k in
                    ("time_us_min", "time_us_max", "cv", "busbw_GBps_min", "busbw_GBps_max"))):
                return f"results[{i}].{mode}.spread is malformed"
        if row.get("out_of_place") is None and row.get("in_place") is None:
            return f"results[{i}] has neither out_of_place nor in_place figures"
    return None


# ---- what the commands ask of a row ----
def modes(choice):
    """The mode keys for a --mode both|out|in option."""
    return {"both": MODES, "out": ("out_of_place",), "in": ("in_place",)}[choice]


def ranks(doc):
    world = doc.get("world") or {}
    return world.get("size")


def hosts(doc):
    world = doc.get("world") or {}
    h = world.get("hosts")
    return h if isinstance(h, list) else []


def key(row, mode):
    """What lines a row up across files."""
    return (row["collective"], row.get("backend", "?"), row.get("dtype", row["type"]),
            row["redop"], row["root"], row.get("setting", ""), row["size"], mode)


def bandwidth(row, mode):
    """(value, low, high, metric): busbw where defined, else algbw (one rank), with the
    trials' range when the row has one (else low = high = value)."""
    m = row.get(mode)
    if not m:
        return None
    metric = "busbw" if m.get("busbw_GBps") is not None else "algbw"
    value = m.get(f"{metric}_GBps")
    if value is None:
        return None
    sp = m.get("spread")
    if sp and metric == "busbw" and sp.get("busbw_GBps_min") is not None:
        return value, sp["busbw_GBps_min"], sp["busbw_GBps_max"], metric
    if sp and sp.get("time_us_max"):
        # algbw ranges follow from the time's range
        return value, value * m["time_us"] / sp["time_us_max"], \
            value * m["time_us"] / sp["time_us_min"], metric
    return value, value, value, metric


def has_trials(row):
    return any(row.get(m) and "spread" in row[m] for m in MODES)


def describe(path, doc):
    """One line saying what a file holds."""
    world = doc.get("world") or {}
    bits = [str(doc.get("command", "?"))]
    if world:
        nh = len(world.get("hosts") or [])
        bits.append(f"{world.get('size')} ranks on {nh} host{'s' if nh != 1 else ''}, "
                    f"backend {world.get('backend', '?')}")
    if doc.get("trials"):
        bits.append(f"{doc['trials']} trials")
    if doc.get("start_time"):
        bits.append(f"started {doc['start_time']}")
    if doc.get("complete") is False:
        bits.append("INCOMPLETE (the run did not finish)")
    return f"# {path}: " + ", ".join(bits)

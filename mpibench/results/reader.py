"""Saved results files, as report, compare, plot, sweep and predict read them.

load() is the one place a file is read: document.load() refuses anything that is not
a results document (UsageError naming the file, never a traceback); load() adds checks
of the fields only these commands read (trials' spread, sweep settings, labels), so the
commands may trust every field they touch.
"""

from ..errors import UsageError
from . import document, traindoc

MODES = document.MODES


def load(path):
    """The results document in path (a dict with a 'results' list of rows)."""
    doc = document.load(path)
    problem = _problem(doc)
    if problem:
        raise UsageError(f"results file {path}: {problem}")
    return doc


def _problem(doc):
    problem = traindoc.problem(doc)
    if problem:
        return problem
    world = doc.get("world")
    if world and "hosts" in world and not (isinstance(world["hosts"], list) and all(
            isinstance(h, str) for h in world["hosts"])):
        return "world.hosts is not a list of names"
    for i, row in enumerate(doc["results"]):
        for key in ("backend", "dtype", "setting"):
            if key in row and not isinstance(row[key], str):
                return f"results[{i}].{key} is not text"
        if "requested_size" in row and not (isinstance(row["requested_size"], int)
                                            and row["requested_size"] >= 0):
            return f"results[{i}].requested_size is not a size"
        for mode in MODES:
            m = row.get(mode)
            if m is None:
                continue
            if not m["time_us"] > 0:
                return f"results[{i}].{mode}.time_us is 0"
            sp = m.get("spread")
            if sp is None:
                continue
            if not (isinstance(sp, dict) and all(document.finite(sp.get(k)) and sp[k] > 0 for k in
                                                 ("time_us_min", "time_us_max"))
                    and all(sp.get(k) is None or document.finite(sp[k]) for k in
                            ("cv", "busbw_GBps_min", "busbw_GBps_max"))):
                return f"results[{i}].{mode}.spread is malformed"
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


def first_mode(row, wanted=None):
    """The mode a one-mode summary shows: wanted ('out_of_place'/'in_place') if measured,
    else out-of-place where measured, else in-place."""
    for mode in ([wanted] if wanted else MODES):
        if row.get(mode):
            return mode
    return None


def key(row, mode, backend=True):
    """What lines a row up across files (backend False: across backends of one file).
    A p2p row's link (from->to) is part of it: one row per link at the same size."""
    return (row["collective"], row.get("backend", "?") if backend else None,
            row.get("dtype", row["type"]), row["redop"], row["root"],
            row.get("setting", "") + row.get("link", ""), row["size"], mode)


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

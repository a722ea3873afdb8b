"""Saved results files, as the commands read them. load() is the one place a file is read:
anything that is not a results document, once other tools' output (nccltestslog, nccltests,
netpipe) is turned into one, is refused (UsageError naming the file), so the commands may
trust every field they touch."""
import os
from typing import Any, Dict, List, Optional, Tuple

from ..errors import UsageError
from ..measure.modes import MODES, ModeKey
from . import document, nccltestslog, nccltests, netpipe, schema
from .nccltestslog import Path
from .numbers import counted
from .schema import Doc


def load(path: Path, collective: Optional[str] = None) -> schema.Document:
    """The validated results document in PATH, or UsageError (collective: --collective)."""
    over = f"over the {document.MAX_BYTES >> 20} MiB limit for a results file"
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > document.MAX_BYTES:
                raise schema.Bad(f"{size} bytes, {over}")
            data = f.read(document.MAX_BYTES + 1)
        if len(data) > document.MAX_BYTES:
            raise schema.Bad(over)
        return document.validate(parse_bytes(data, collective, path))
    except schema.Bad as exc:
        raise UsageError(f"results file {path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot read results file {path}: {exc.strerror or exc}") from None


def parse_bytes(data: bytes, collective: Optional[str] = None, path: Optional[Path] = None) -> Any:
    """A results document from mpibench's JSON, nccl-tests' -J JSON or printed output, or NetPIPE's."""
    text = document.utf8(data)
    printed = text.lstrip()[:1] != "{"
    log = printed and nccltestslog.looks_like_text(text)
    tool = "NetPIPE" if printed and not log and netpipe.looks_like_text(text) else "nccl-tests"
    try:
        if tool == "NetPIPE":
            return netpipe.parse_text(text)
        if log:
            return nccltestslog.parse_text(text, collective, path)
        try:
            doc = document.parse(data)
        except schema.Bad:
            if (doc := document.mend(text)) is None:
                raise
        return nccltests.parse_json(doc) if nccltests.looks_like_json(doc) else doc
    except nccltests.Unreadable as exc:
        raise schema.Bad(f"{tool} output: {exc}") from None


# ---- what the commands ask of a row ----
def modes(choice: str) -> Tuple[ModeKey, ...]:
    """The mode keys for a --mode both|out|in option."""
    return {"both": MODES, "out": ("out_of_place",), "in": ("in_place",)}[choice]


def ranks(doc: Doc) -> Optional[int]:
    return (doc.get("world") or {}).get("size")


def hosts(doc: Doc) -> List[str]:
    return (doc.get("world") or {}).get("hosts") or []


def first_mode(row: Dict[str, Any], wanted: Optional[str] = None) -> Optional[str]:
    """wanted if measured, else the first measured mode."""
    return next((mode for mode in ([wanted] if wanted else MODES) if row.get(mode)), None)


Bandwidth = Tuple[float, float, float, str]   # bandwidth(): GB/s, its trials' range, metric


def bandwidth(row: Dict[str, Any], mode: str) -> Optional[Bandwidth]:
    """(value, low, high, metric): busbw, else algbw (one rank), with the trials' range if any."""
    m = row.get(mode) or {}
    metric = "busbw" if m.get("busbw_GBps") is not None else "algbw"
    if (value := m.get(f"{metric}_GBps")) is None:
        return None
    sp = m.get("spread")
    if sp and metric == "busbw" and sp.get("busbw_GBps_min") is not None:
        return value, sp["busbw_GBps_min"], sp["busbw_GBps_max"], metric
    if sp and sp.get("time_us_max"):
        # algbw ranges follow from the time's range
        return value, value * m["time_us"] / sp["time_us_max"], \
            value * m["time_us"] / sp["time_us_min"], metric
    return value, value, value, metric


def has_trials(row: Dict[str, Any]) -> bool:
    return any(row.get(m) and "spread" in row[m] for m in MODES)


def tests(doc: Doc) -> List[Dict[str, Any]]:
    """The tests (tables) of a printed log; [] for a file mpibench wrote."""
    return found if isinstance(found := doc.get("tests"), list) else []


def pick_test(doc: Doc, path: str, number: Optional[int]) -> Doc:
    """Only test NUMBER's rows (--test) of a file of several tests; UsageError if it has fewer."""
    held = tests(doc)
    if number is None or len(held) < 2:
        return doc
    if number > len(held):
        raise UsageError(f"--test {number}: {path} holds {len(held)} tests")
    info = held[number - 1]
    return dict(doc, results=[r for r in doc["results"] if r.get("test") == number],
                tests=[info], average_bus_bandwidth=info.get("average_bus_bandwidth"))


def first_of_each(doc: Doc, path: str) -> Tuple[Doc, Optional[str]]:
    """(document, note): of the tests repeating a collective only the first, and a line saying so."""
    by_coll: Dict[str, List[Any]] = {}
    for t in tests(doc):
        by_coll.setdefault(t["collective"], []).append(t["test"])
    repeats = {c: ns for c, ns in by_coll.items() if len(ns) > 1}
    if not repeats:
        return doc, None
    keep = {ns[0] for ns in by_coll.values()}
    note = "; ".join(f"tests {', '.join(map(str, ns))} all hold {c}: using test {ns[0]}"
                     for c, ns in repeats.items())
    return dict(doc, results=[r for r in doc["results"] if r.get("test") in keep]), \
        f"# {path}: {note} (give --test N for another)"


def describe(path: str, doc: Doc) -> str:
    """One line saying what a file holds."""
    world = doc.get("world") or {}
    bits = [str(doc.get("command", "?"))]
    if world:
        nh = len(world.get("hosts") or [])
        where = f" on {counted(nh, 'host')}"
        if world.get("hosts_complete") is False:    # a printed log without every rank line
            where = f" on {nh}+ hosts (the rank lines list some of them)" if nh else \
                " (from the rows; no rank lines, hosts unknown)"
        bits.append(f"{counted(world.get('size'), 'rank')}{where}, backend {world.get('backend', '?')}")
    elif tests(doc):
        sizes = sorted({t["ranks"] for t in tests(doc) if t["ranks"]})
        bits.append("ranks unknown (no complete rank lines, and the rows do not decide it)"
                    if not sizes else "ranks " + ", ".join(map(str, sizes)) + " (per test)")
    if len(tests(doc)) > 1:
        bits.append(f"{len(tests(doc))} tests: " + ", ".join(
            f"{t['test']} {t['collective']}" for t in tests(doc)))
    if doc.get("trials"):
        bits.append(f"{doc['trials']} trials")
    if doc.get("start_time"):
        bits.append(f"started {doc['start_time']}")
    if doc.get("complete") is False:
        bits.append("INCOMPLETE (the run did not finish)")
    return f"# {path}: " + ", ".join(bits)

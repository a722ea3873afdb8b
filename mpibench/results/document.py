"""Reading a results JSON back (for report, compare): validated, or one clear error.

    doc = resultsfile.load("results.json")      # UsageError naming the file and the problem
    for row, mode, m in resultsfile.measurements(doc):
        print(row["collective"], row["size"], mode, m["busbw_GBps"])

A results file may come from anywhere (another cluster, a colleague, a broken job), so
load() trusts nothing: it refuses files over MAX_BYTES, input that is not UTF-8 JSON,
NaN/Infinity, duplicate keys, nesting deeper than MAX_DEPTH, and any field of the wrong
type or with an absurd value. Fields it does not know are kept as they are (newer
versions may add some). A file from a run that did not finish ("complete": false) is
valid: its rows were measured.
"""
import datetime
import json
import math
import os
import re

from .. import __version__
from ..errors import UsageError
from ..measure.modes import MODES

MAX_BYTES = 64 << 20        # a 4096-rank sweep with per-rank times stays well below
MAX_DEPTH = 32
MAX_SIZE = 1 << 50          # 1 PiB: no collective buffer is larger
MAX_RANKS = 1 << 20
MAX_ROWS = 1 << 20
FORMAT_VERSION = 1


def now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def new(command, argv, args=None, **fields):
    """A fresh results document: the one header every writer starts from (run and every
    command with --json, sweep's merged file, nccl-tests' output read back)."""
    doc = {"version": FORMAT_VERSION, "tool": "mpibench", "mpibench_version": __version__,
           "command": command, "start_time": now(), "end_time": None, "complete": False,
           "argv": list(argv), "results": [], "hosts": [], "notes": []}
    if args is not None:
        doc["args"] = _jsonable(vars(args))
    doc.update(fields)
    return doc


def _jsonable(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)):
            out[k] = [x if isinstance(x, (str, int, float, bool)) else str(x) for x in v]
        else:
            out[k] = str(v)
    return out


class _Bad(Exception):
    """A problem at a place in the document (turned into one UsageError by load)."""


def load(path, collective=None):
    """The validated results document in PATH (a dict), or UsageError. collective: the
    collective of printed tables that do not name theirs (--collective)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_BYTES:
                raise _Bad(f"{size} bytes, over the {MAX_BYTES >> 20} MiB limit for a results file")
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise _Bad(f"over the {MAX_BYTES >> 20} MiB limit for a results file")
        return validate(_read(data, collective, path))
    except _Bad as exc:
        raise UsageError(f"results file {path}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot read results file {path}: {exc.strerror or exc}") from None


def _read(data, collective=None, path=None):
    """A results document from the bytes of a file: mpibench's JSON, nccl-tests' (or
    mpibench's) printed output or nccl-tests' -J JSON, or NetPIPE's printed output, turned
    into one (path: the file's, whose name may name a printed table's collective)."""
    from . import nccllogs, nccltests, netpipe
    text = _text(data)
    try:
        if not text.lstrip()[:1] == "{" and netpipe.looks_like_text(text) \
                and not nccllogs.looks_like_text(text):
            return netpipe.parse_text(text)
    except nccltests.Unreadable as exc:
        raise _Bad(f"NetPIPE output: {exc}") from None
    try:
        if not text.lstrip()[:1] == "{" and nccllogs.looks_like_text(text):
            return nccllogs.parse_text(text, collective, path)
        try:
            doc = parse(data)
        except _Bad:
            doc = mend(text)
            if doc is None:
                raise
        return nccltests.parse_json(doc) if nccltests.looks_like_json(doc) else doc
    except nccltests.Unreadable as exc:
        raise _Bad(f"nccl-tests output: {exc}") from None


def _text(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"not UTF-8 text (byte {exc.start})") from None


def finite(x, low=-math.inf):
    """Whether x is a real number (not a bool), finite and at least low."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= low


def parse(data):
    """bytes -> JSON value, refusing NaN/Infinity, duplicate keys and deep nesting."""
    text = _text(data)
    _check_depth(text)
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise _Bad(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:     # e.g. an integer of 5000 digits
        raise _Bad(f"not a results file: {exc}") from None


_FIELD = re.compile(r' ("(?:[^"\\]|\\.)*"): (.*)$')


def mend(text):
    """mpibench's own JSON (results/files.py: a line per field and per row, the rows last)
    cut by a kill inside a write, which leaves the new bytes up to the cut and the older
    closing lines after it: the fields and the whole rows before the cut, marked incomplete;
    None for any other text."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != "{":
        return None
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    doc, rows = {}, None
    for line in lines[1:]:
        body = line.rstrip().rstrip(",")
        try:
            if rows is not None:
                if body == " ]":
                    rows = None
                    continue
                # a row is one JSON object: whole when its closing brace was written (the
                # writer goes forward), whatever older text the cut left after it
                row, end = decoder.raw_decode(line, len(line) - len(line.lstrip()))
                if not isinstance(row, dict) or (rows and row.keys() != rows[0].keys()):
                    break
                rows.append(row)
                if line[end:].strip() not in ("", ","):
                    break
                continue
            m = _FIELD.match(body)
            if m is None:
                break
            key = json.loads(m.group(1))
            if m.group(2) == "[":
                doc[key] = rows = []
            else:
                doc[key] = json.loads(m.group(2), parse_constant=_no_constant)
        except ValueError:
            break
    if not doc.get("command"):
        return None
    doc.update(complete=False, incomplete="the file was cut inside a write (the run was "
               "killed while writing it): the rows before the cut are read")
    return doc


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _check_depth(text):
    # Before parsing, so that hostile nesting costs one linear scan, not a deep recursion.
    depth = 0
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if ch in "[{" else -1
        if depth > MAX_DEPTH:
            raise _Bad(f"nested deeper than {MAX_DEPTH} levels")


def _no_constant(name):
    raise _Bad(f"{name} is not a number a results file may hold")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Bad(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


# ---- structure ----
def _need(obj, key, kinds, where, optional=False):
    if key not in obj:
        if optional:
            return None
        raise _Bad(f"{where}: missing {key!r}")
    value = obj[key]
    if optional and value is None:
        return None
    if isinstance(value, bool) and bool not in kinds:
        raise _Bad(f"{where}.{key}: {_kind(value)}, expected {_names(kinds)}")
    if not isinstance(value, kinds):
        raise _Bad(f"{where}.{key}: {_kind(value)}, expected {_names(kinds)}")
    return value


def _kind(value):
    return "null" if value is None else type(value).__name__


def _names(kinds):
    return " or ".join({"int": "integer", "float": "number", "str": "string", "list": "list",
                        "dict": "object", "bool": "true/false"}[k.__name__] for k in kinds)


NUM = (int, float)


def _number(obj, key, where, low=0.0, high=math.inf, optional=False, kinds=NUM):
    value = _need(obj, key, kinds, where, optional)
    if value is None:
        return None
    if not low <= value <= high:
        raise _Bad(f"{where}.{key}: {value} is out of range ({low:g} to {high:g})")
    return value


def validate(doc):
    """The document itself if it is a results file mpibench can read; else _Bad."""
    if not isinstance(doc, dict):
        raise _Bad(f"the top level is a {_kind(doc)}, expected an object")
    if doc.get("tool") != "mpibench":
        raise _Bad("not an mpibench results file (no \"tool\": \"mpibench\")")
    version = _need(doc, "version", (int,), "file")
    if version > FORMAT_VERSION or version < 1:
        raise _Bad(f"format version {version}: this mpibench reads version {FORMAT_VERSION}; "
                   f"use a newer mpibench")
    _need(doc, "complete", (bool,), "file")
    _need(doc, "mpibench_version", (str,), "file")
    _need(doc, "start_time", (str,), "file")
    _need(doc, "end_time", (str,), "file", optional=True)
    _need(doc, "incomplete", (str,), "file", optional=True)
    rows = _need(doc, "results", (list,), "file")
    if len(rows) > MAX_ROWS:
        raise _Bad(f"{len(rows)} rows, over the limit of {MAX_ROWS}")
    for i, row in enumerate(rows):
        _row(row, f"results[{i}]")
    world = _need(doc, "world", (dict,), "file", optional=True)
    if world is not None:
        _number(world, "size", "world", 1, MAX_RANKS, kinds=(int,))
    _need(doc, "hosts", (list,), "file", optional=True)
    _need(doc, "notes", (list,), "file", optional=True)
    _number(doc, "average_bus_bandwidth", "file", optional=True)
    return doc


def _row(row, where):
    if not isinstance(row, dict):
        raise _Bad(f"{where}: {_kind(row)}, expected an object")
    for key in ("collective", "type", "redop"):
        _need(row, key, (str,), where)
    _number(row, "size", where, 0, MAX_SIZE, kinds=(int,))
    _number(row, "count", where, 0, MAX_SIZE, kinds=(int,))
    _number(row, "root", where, -1, MAX_RANKS, kinds=(int,))
    _number(row, "bw_bytes", where, 0, MAX_SIZE * MAX_RANKS, optional=True, kinds=(int,))
    _number(row, "busbw_factor", where, 0, 2, optional=True)
    present = 0
    for mode in MODES:
        m = _need(row, mode, (dict,), where, optional=True)
        if m is None:
            continue
        present += 1
        at = f"{where}.{mode}"
        _number(m, "time_us", at, 0, 1e12)
        _number(m, "algbw_GBps", at, 0, 1e9, optional=True)
        _number(m, "busbw_GBps", at, 0, 1e9, optional=True)
        _number(m, "nwrong", at, 0, MAX_SIZE * MAX_RANKS, optional=True, kinds=(int,))
    if not present:
        raise _Bad(f"{where}: neither out_of_place nor in_place was measured")
    per_rank = _need(row, "per_rank_time_us", (dict,), where, optional=True)
    for mode, times in (per_rank or {}).items():
        if not isinstance(times, list) or len(times) > MAX_RANKS:
            raise _Bad(f"{where}.per_rank_time_us.{mode}: expected a list of at most {MAX_RANKS} times")
        for t in times:
            if isinstance(t, bool) or not isinstance(t, NUM) or not 0 <= t <= 1e12:
                raise _Bad(f"{where}.per_rank_time_us.{mode}: {t!r} is not a time in microseconds")


def measurements(doc):
    """(row, mode, figures) for every measured mode of every row, in file order."""
    for row in doc["results"]:
        for mode in MODES:
            if row.get(mode) is not None:
                yield row, mode, row[mode]

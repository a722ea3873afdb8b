"""The results document: a new one, and one read back validated, or one clear error. A
results file may come from anywhere (another cluster, a colleague, a broken job), so what is
read back is trusted in nothing; unknown fields are kept (newer versions may add some), and
a run that did not finish ("complete": false) is valid: its rows were measured."""
import argparse
import datetime
import json
import math
import re
from typing import Any, Dict, List, NoReturn, Optional, Tuple, Union, cast

from .. import __version__
from ..measure.modes import MODES, ModeKey
from ..measure.row import Figures, Row
from . import schema
from .schema import Bad, Document

MAX_BYTES = 64 << 20        # a 4096-rank sweep with per-rank times stays well below
MAX_DEPTH = 32
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
FORMAT_VERSION = 1


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def new(command: str, argv: List[str], args: Optional[argparse.Namespace] = None,
        **fields: Any) -> Dict[str, Any]:
    """A fresh results document: the header every writer starts from."""
    doc: Dict[str, Any] = {"version": FORMAT_VERSION, "tool": "mpibench", "mpibench_version": __version__,
           "command": command, "start_time": now(), "end_time": None, "complete": False,
           "argv": list(argv), "results": [], "hosts": [], "notes": []}
    if args is not None:
        doc["args"] = {k: _jsonable(v) for k, v in vars(args).items()}
    doc.update(fields)
    return doc


def _jsonable(v: Any) -> Any:
    """An option's value as JSON: a list stays a list, what JSON has no type for is text."""
    if isinstance(v, (list, tuple)):
        return [x if isinstance(x, (str, int, float, bool)) else str(x) for x in v]
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Bad(f"not UTF-8 text (byte {exc.start})") from None


def finite(x: Any, low: float = -math.inf) -> bool:
    """Whether x is a real number (not a bool), finite and at least low."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= low


def parse(data: bytes) -> Any:
    """bytes -> JSON value, refusing NaN/Infinity, duplicate keys and deep nesting."""
    text = utf8(data)
    depth = 0       # checked before parsing: hostile nesting costs one linear scan, not a deep recursion
    for ch in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        depth += 1 if ch in "[{" else -1
        if depth > MAX_DEPTH:
            raise Bad(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise Bad(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:     # e.g. an integer of 5000 digits
        raise Bad(f"not a results file: {exc}") from None


_FIELD = re.compile(r' ("(?:[^"\\]|\\.)*"): (.*)$')


def mend(text: str) -> Optional[Dict[str, Any]]:
    """mpibench's JSON cut by a kill inside a write: the fields and whole rows before the cut; else None."""
    lines = text.split("\n")
    if len(lines) < 3 or lines[0] != "{":
        return None
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    doc: Dict[str, Any] = {}
    rows: Optional[List[Dict[str, Any]]] = None
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
            if (m := _FIELD.match(body)) is None:
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


def _no_constant(name: str) -> NoReturn:
    raise Bad(f"{name} is not a number a results file may hold")


def _no_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise Bad(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def validate(doc: Any) -> Document:
    """The document if it is a results file mpibench can read (schema.Document); else Bad."""
    if not isinstance(doc, dict):
        raise Bad(f"the top level is a {type(doc).__name__}, expected an object")
    if doc.get("tool") != "mpibench":
        raise Bad("not an mpibench results file (no \"tool\": \"mpibench\")")
    version = doc.get("version")
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise Bad(f"format version {version}: this mpibench reads version {FORMAT_VERSION}; "
                  f"use a newer mpibench")
    schema.check(doc, Document)
    for i, row in enumerate(doc["results"]):
        if all(row.get(mode) is None for mode in MODES):
            raise Bad(f"results[{i}]: neither out_of_place nor in_place was measured")
        if zero := next((m for m in MODES if row.get(m) is not None and not row[m]["time_us"] > 0), None):
            raise Bad(f"results[{i}].{zero}.time_us is 0")
    if doc.get("command") == "train" and "train" not in doc:
        raise Bad("no 'train' part (not a train result)")
    return cast(Document, doc)


def measurements(doc: Union[Document, schema.Doc]) -> List[Tuple[Row, ModeKey, Figures]]:
    """(row, mode, figures) for every measured mode of every row, in file order."""
    return [(row, mode, figures) for row in doc.get("results", []) for mode in MODES
            if (figures := row.get(mode)) is not None]

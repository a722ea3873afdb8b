"""Every format a results document is exported in, registered once. LIVE: the files a command
writes as it goes, each named by its option (ResultFile: appended, never overwritten;
MetricsFile: replaced whole); REPORT: what `report --format` prints from saved files. Add a
format: its render function in a module of its own, and one line here."""
import argparse
from typing import Any, Callable, Dict, List, NamedTuple, Sequence, Tuple, Union

from . import checktext, nccltests, reporttext
from .files import ResultFile, json_parts, render_csv
from .metrics import MetricsFile
from .schema import Doc

Parts = Union[str, List[str]]
File = Union[ResultFile, MetricsFile]


class Live(NamedTuple):
    option: str                                         # the args attribute that names the file
    open: Callable[[str, argparse.Namespace], File]     # (path, args) -> the file, reserved now


def _json(path: str, args: argparse.Namespace) -> File:
    """mpibench's JSON, or nccl-tests' -J schema with --json-format nccl-tests."""
    nccl_tests = getattr(args, "json_format", None) == "nccl-tests"
    return ResultFile(path, nccltests.render if nccl_tests else json_parts)


def _csv(doc: Dict[str, Any]) -> Parts:
    """A line per row and mode; check's a line per host (its --health: per row, as any command)."""
    if doc.get("command") == "check" and "check" in doc and not (doc.get("args") or {}).get("health"):
        return checktext.csv(doc)
    return render_csv(doc)


LIVE = (Live("json", _json),
        Live("csv", lambda path, args: ResultFile(path, _csv, "CSV")),
        Live("metrics", lambda path, args: MetricsFile(path)))

REPORT: Dict[str, Callable[[Sequence[Tuple[str, Doc]]], str]] = {
    "text": reporttext.text, "markdown": reporttext.markdown, "csv": reporttext.csv_text}


def open_files(args: argparse.Namespace) -> List[File]:
    """The files of every LIVE option given, in the order above."""
    return [e.open(path, args) for e in LIVE if (path := getattr(args, e.option, None))]

"""What report prints: saved results as run printed them (text), as markdown, or as CSV."""
from typing import Any, Dict, List, Sequence, Tuple

from ..measure.modes import MODES
from . import reader, summary, tables, traintext
from .files import CSV_FIELDS, csv_lines, csv_rows
from .schema import Doc

Docs = Sequence[Tuple[str, Doc]]        # (path, document)


def groups(doc: Doc) -> List[Tuple[str, List[Dict[str, Any]], List[str]]]:
    """(title, rows, its test's average line) per test, setting and collective, in the order
    first measured; the average only where a printed log's tests each have their own."""
    by: Dict[Tuple[int, str, str], List[Dict[str, Any]]] = {}
    for row in doc["results"]:
        by.setdefault((row.get("test", 0), row.get("setting", ""), row["collective"]), []).append(row)
    out = []
    for (test, setting, collective), rows in by.items():
        info = next((t for t in reader.tests(doc) if t["test"] == test), None)
        title = collective + (f" ({setting})" if setting else "")
        if info:
            name = f"{info['name']}, " if info["name"] else ""
            title += f" (test {test}: {name}line {info['line']}, {info['ranks'] or 'unknown'} ranks)"
        avg = info["average_bus_bandwidth"] if info else None
        # a printed log's test has its own average; mpibench's output has one for every table
        own = info and (avg is not None or doc.get("average_bus_bandwidth") is None)
        shown = "n/a (not in the log)" if avg is None else format(avg, "g")
        average = [f"# {'Avg bus bandwidth':<20s} : {shown}"] if own else []
        out.append((title, rows, average))
    return out


def _hosts(doc: Doc, fmt: str) -> List[str]:
    """Per-host blocks; a malformed entry (files from elsewhere) is named, not fatal."""
    lines = []
    for entry in doc.get("hosts") or []:
        try:
            lines += tables.host_section(entry, fmt)
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
            lines.append("# a per-host entry is malformed: skipped")
    return lines


def text(docs: Docs) -> str:
    lines = []
    for path, doc in docs:
        lines.append(reader.describe(path, doc))
        if doc.get("env"):
            lines.append("# env: " + " ".join(f"{k}={v}" for k, v in doc["env"].items()))
        for title, rows, average in groups(doc):
            figures = [m for _, _, m in tables.measured(rows)]
            per_iter = any(m.get("per_iter") for m in figures)
            max_error = any("max_error" in m for m in figures)   # a log before nccl-tests 2.13
            lines += [f"#\n# Collective: {title}", tables.row_header(per_iter, max_error)]
            lines += [tables.row_line(r, per_iter) for r in rows] + average
        if trial_rows := [r for r in doc["results"] if reader.has_trials(r)]:
            lines += ["#\n# median of the trials per row, and their spread", *tables.trials_table(trial_rows)]
        lines += _hosts(doc, "simple") + summary.comparison_lines(doc) + summary.line_rate_lines(doc)
        lines += summary.path_limit_lines(doc) + summary.published_lines(doc)
        lines += (traintext.text(doc) if "train" in doc else summary.closing_lines(doc) if doc["results"]
                  else ["# no measured rows (this command measures no collective)"]) + [""]
    return "\n".join(lines)


def _md(line: str) -> str:
    return "\n".join(x.lstrip("#").strip() for x in line.splitlines()).strip()


def markdown(docs: Docs) -> str:
    parts = []
    for path, doc in docs:
        parts.append(f"## {path}\n\n{_md(reader.describe(path, doc)).split(': ', 1)[1]}")
        for title, rows, average in groups(doc):
            cells = [[text.strip() for _, text in tables.cells(r)] for r in rows]
            parts.append(f"### {title}\n\n" + tables.commented(cells, tables.ROW_HEADERS, "github")[0])
            parts += [_md(x) for x in average]
        if trial_rows := [r for r in doc["results"] if reader.has_trials(r)]:
            parts.append("### Trials\n\n" + tables.trials_table(trial_rows, "github")[0])
        parts += [_md(line) if line.startswith("#") else line for line in _hosts(doc, "github")]
        trained = "train" in doc
        parts.append("### Training steps\n\n```\n" + "\n".join(traintext.text(doc)) + "\n```" if trained
                     else _md("\n".join(summary.closing_lines(doc))))
    return "\n\n".join(p for p in parts if p) + "\n"


def csv_text(docs: Docs) -> str:
    lines: List[Any] = [("file", "test", "setting") + CSV_FIELDS + ("max_error",)]
    for path, doc in docs:
        for row in doc["results"]:
            measured = [m for m in MODES if row.get(m) is not None]
            for values, mode in zip(csv_rows({"results": [row]}), measured):
                err = row[mode].get("max_error")
                lines.append([path, row.get("test", ""), row.get("setting", "")] + values +
                             ["" if err is None else err])
    return "".join(csv_lines(lines))

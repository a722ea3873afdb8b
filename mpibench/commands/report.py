"""mpibench report: saved results rendered as the run printed them (no MPI, no ranks)."""
import csv
import io
import sys

from tabulate import tabulate

from ..results import reader, summary, tables, traindoc
from ..results.files import CSV_FIELDS, csv_rows

HELP = "print saved JSON results as tables (text, markdown or csv)"
DESCRIPTION = (
    "Renders results files written by run --json (or sweep) as the tables run prints: "
    "nccl-tests' rows per collective, the median and spread of runs with --trials, the "
    "per-host tables and the average bus bandwidth. Needs no MPI.")
SESSION = "offline"


def add_arguments(p):
    p.add_argument("files", nargs="+", metavar="FILE", help="results JSON files")
    p.add_argument("--format", choices=("text", "markdown", "csv"), default="text",
                   help="text (as run prints it, default), markdown or csv")


def groups(doc):
    """Rows by (setting, collective), in the order first measured."""
    out = {}
    for row in doc["results"]:
        out.setdefault((row.get("setting", ""), row["collective"]), []).append(row)
    return out


def _title(setting, collective):
    return f"{collective}" + (f" ({setting})" if setting else "")


def _hosts(doc, fmt):
    """Per-host blocks; a malformed entry (files from elsewhere) is named, not fatal."""
    lines = []
    for entry in doc.get("hosts") or []:
        try:
            lines += tables.host_section(entry, fmt)
        except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
            lines.append("# a per-host entry is malformed: skipped")
    return lines


def text(docs):
    lines = []
    for path, doc in docs:
        lines.append(reader.describe(path, doc))
        if doc.get("env"):
            lines.append("# env: " + " ".join(f"{k}={v}" for k, v in doc["env"].items()))
        for (setting, coll), rows in groups(doc).items():
            per_iter = tables.has_per_iter(rows)
            lines += [f"#\n# Collective test starting: {coll}_perf" + (f" ({setting})" if setting else ""),
                      tables.row_header(per_iter)]
            lines += [tables.row_line(r, per_iter) for r in rows]
        trial_rows = [r for r in doc["results"] if reader.has_trials(r)]
        if trial_rows:
            lines.append("#\n# median of the trials per row, and their spread")
            lines += ["#  " + x for x in tables.trials_table(trial_rows).splitlines()]
        lines += _hosts(doc, "simple")
        lines += summary.comparison_lines(doc) + summary.line_rate_lines(doc)
        if "train" in doc:
            lines += traindoc.text(doc) + [""]
        else:
            lines += (summary.closing_lines(doc) if doc["results"] else
                      ["# no measured rows (this command measures no collective)"]) + [""]
    return "\n".join(lines)


def _md(line):
    return "\n".join(x.lstrip("#").strip() for x in line.splitlines()).strip()


def markdown(docs):
    parts = []
    for path, doc in docs:
        parts.append(f"## {path}\n\n{_md(reader.describe(path, doc)).split(': ', 1)[1]}")
        for (setting, coll), rows in groups(doc).items():
            parts.append(f"### {_title(setting, coll)}\n\n" + tabulate(
                [tables.row_cells(r) for r in rows], headers=tables.ROW_HEADERS,
                tablefmt="github", disable_numparse=True))
        trial_rows = [r for r in doc["results"] if reader.has_trials(r)]
        if trial_rows:
            parts.append("### Trials\n\n" + tables.trials_table(trial_rows, "github"))
        for line in _hosts(doc, "github"):
            parts.append(_md(line) if line.startswith("#") else line)
        if "train" in doc:
            parts.append("### Training steps\n\n```\n" + "\n".join(traindoc.text(doc)) + "\n```")
        else:
            parts.append(_md("\n".join(summary.closing_lines(doc))))
    return "\n\n".join(p for p in parts if p) + "\n"


def csv_text(docs):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(("file", "setting") + CSV_FIELDS)
    for path, doc in docs:
        for row in doc["results"]:
            for values in csv_rows({"results": [row]}):
                w.writerow([path, row.get("setting", "")] + values)
    return out.getvalue()


def execute(session, args):
    docs = [(path, reader.load(path)) for path in args.files]   # every file checked first
    render = {"text": text, "markdown": markdown, "csv": csv_text}[args.format]
    sys.stdout.write(render(docs))
    return 0

"""Rank 0's live output: the header, each row as soon as it is measured, per-host
tables, the summary, and the JSON/CSV files brought up to date after every row.

The watchdog thread may mark the document incomplete at any moment (a hang, a signal):
a lock keeps it from writing while the main thread is changing the document."""
import sys
import threading
from typing import Any, List

from ..errors import UsageError
from ..launch import faults
from . import document, nccltests, tables
from .document import now
from .files import json_parts, render_csv, ResultFile
from .metrics import MetricsFile
from .numbers import counted
from .schema import HostAnalysis, HostEntry


class RunOutput:
    def __init__(self, session, command, args, json_path=None, csv_path=None):
        self.s = session
        self._lock = threading.Lock()
        self.files: List[Any] = []     # ResultFile and MetricsFile: path, write(doc), announcement()
        if json_path:
            nccl_tests = getattr(args, "json_format", None) == "nccl-tests"
            self.files.append(ResultFile(json_path, nccltests.render if nccl_tests else json_parts))
        self.csv = ResultFile(csv_path, render_csv, "CSV") if csv_path else None
        if self.csv:
            self.files.append(self.csv)
        if getattr(args, "metrics", None):
            self.files.append(MetricsFile(args.metrics))
        self.doc = document.new(command, sys.argv[1:], args)
        self.per_iter = getattr(args, "per_iter_timing", 0) == 1   # -I 1: its columns
        self.trials = None   # a trials.Collector when run --trials K > 1 merges repeated rows
        self.abandoned = False   # abandon() took the lock for good

    def csv_from(self, render):
        """The CSV file's text from render(doc), not a line per row (e.g. check's line per host)."""
        if self.csv is not None:
            self.csv.render = render

    def say(self, text):
        self.s.out(text)

    def note(self, text):
        """A line for the reader that also belongs in the results file."""
        self.s.out(f"# {text}")
        with self._lock:
            self.doc["notes"].append(text)
            self.flush()

    def announce_files(self):
        for f in self.files:
            self.say(f.announcement())

    def set(self, **items):
        """Top-level fields into the document, and the files rewritten."""
        with self._lock:
            self.doc.update(items)
            self.flush()

    def table_header(self, collective):
        """nccl-tests' start line and column header, before a collective's rows."""
        self.say(f"#\n# Collective test starting: {collective}_perf")
        self.say(tables.row_header(self.per_iter))

    def add_row(self, row, line=None):
        """Record the row, then print it (nccl-tests' format, or line): what was seen survives a kill."""
        self.record_row(row)
        self.say(tables.row_line(row, self.per_iter) if line is None else line)

    def record_row(self, row):
        """Add a row to the document and rewrite the files; print nothing."""
        with self._lock:
            if self.trials:
                self.trials.add(self.doc["results"], row)
            else:
                self.doc["results"].append(row)
            self.flush()

    def add_hosts(self, coll, dt, op, size, c, mode, analysis: HostAnalysis) -> None:
        entry: HostEntry = {"collective": coll.name, "size": size, "type": dt.label,
                            "dtype": dt.name, "redop": op, "mode": mode, "symmetric": coll.symmetric,
                            "bw_bytes": coll.bw_bytes(c, dt.size, self.s.size),
                            "busbw_factor": coll.busbw_factor(self.s.size), **analysis}
        for line in tables.host_section(entry):
            self.say(line)
        with self._lock:
            self.doc["hosts"].append(entry)
            self.flush()

    def finish(self, complete=True):
        self.set(end_time=now(), complete=complete)

    def abandon(self, reason, exit=None):
        """Write the document incomplete (exit: the job's verdict) and keep the lock; say what was kept."""
        if not self._lock.acquire(timeout=5):
            return "the results file is busy: left as last written"
        rows = len(self.doc["results"])
        kept = f"{counted(rows, 'row')} measured"
        try:
            self.doc.update(complete=False, incomplete=reason, end_time=now(),
                            **({"exit": exit} if exit else {}))
            self.flush()
        except Exception as exc:
            return f"{kept}; could not rewrite the results file ({exc})"
        finally:
            self.abandoned = True
        paths = ", ".join(f.path for f in self.files)
        return f"{kept}, saved in {paths} (marked incomplete)" if paths else \
            f"{kept} (no --json/--csv file asked for)"

    def record_exit(self, verdict):
        """The job's verdict into the document, also after abandon() (which keeps the lock)."""
        if self.abandoned:
            self.doc["exit"] = verdict
            self.flush()
            return
        self.set(exit=verdict)

    def flush(self):
        for f in self.files:
            f.write(self.doc)


def open_output(session, command, args):
    """Rank 0 reserves the result files before anything is measured; all ranks agree."""
    out, error = None, None
    if session.rank == 0:
        try:
            out = RunOutput(session, command, args, args.json, getattr(args, "csv", None))
        except UsageError as exc:
            error = str(exc)
    session.agree(error)
    if out is not None:
        session.results = out
        switches = faults.notice()      # MPIBENCH_FAULT set: the header and the document say so
        if switches:
            if getattr(args, "health", None):   # its stdout is the one line a plugin reads
                sys.stderr.write(switches[0] + "\n")
            else:
                out.say(switches[0])
            out.set(test_switches=switches[1])
        if getattr(session, "watch", None) is not None:
            session.watch.keep_results(out.abandon)   # a hang or a signal: what was measured stays
    return out


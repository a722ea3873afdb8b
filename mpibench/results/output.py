"""Rank 0's live output: each line as it is known, and the result files brought up to date.

The watchdog thread may mark the document incomplete at any moment (a hang, a signal):
a lock keeps it from writing while the main thread is changing the document."""
import argparse
import sys
import threading
from typing import Any, Dict, Optional

from ..errors import UsageError
from ..launch import faults, verdict
from ..launch.session import Session
from ..measure.collectives.base import Collective, Counts
from ..measure.dtypes import DType
from . import alltoallvtext, document, exporters, tables
from .document import now
from .numbers import counted
from .schema import HostAnalysis, HostEntry
from .rows import Collector


class RunOutput:
    def __init__(self, session: Session, command: str, args: argparse.Namespace) -> None:
        self.s = session
        self._lock = threading.Lock()
        self.files = exporters.open_files(args)
        self.doc = document.new(command, sys.argv[1:], args)
        self.per_iter = getattr(args, "per_iter_timing", 0) == 1   # -I 1: its columns
        self.trials: Optional[Collector] = None   # run --trials K > 1: merges repeated rows
        self.abandoned = False   # abandon() took the lock for good

    def say(self, *lines: str) -> None:
        for line in lines:
            self.s.out(line)

    def announce_files(self) -> None:
        self.say(*(f.announcement() for f in self.files))

    def set(self, **items: Any) -> None:
        """Top-level fields into the document, and the files rewritten."""
        with self._lock:
            self.doc.update(items)
            self.flush()

    def table_header(self, collective: str) -> None:
        """nccl-tests' start line and column header, before a collective's rows."""
        self.say(f"#\n# Collective test starting: {collective}_perf", tables.row_header(self.per_iter))

    def add_row(self, row: Dict[str, Any], line: Optional[str] = None) -> None:
        """Record the row, then print it (nccl-tests' format, or line): what was seen survives a kill."""
        self.record_row(row)
        self.say(tables.row_line(row, self.per_iter) if line is None else line)
        if line is None and "per_rank_bytes" in row:
            self.say(*alltoallvtext.summary(row, self.s.hosts, self.doc.get("alltoallv")))

    def record_row(self, row: Dict[str, Any]) -> None:
        """Add a row to the document and rewrite the files; print nothing."""
        with self._lock:
            if self.trials:
                self.trials.add(self.doc["results"], row)
            else:
                self.doc["results"].append(row)
            self.flush()

    def add_hosts(self, analysis: HostAnalysis, *, coll: Collective, dt: DType, op: str, size: int, c: Counts,
                  mode: str) -> None:
        entry: HostEntry = {"collective": coll.name, "size": size, "type": dt.label,
                            "dtype": dt.name, "redop": op, "mode": mode, "symmetric": coll.symmetric,
                            "bw_bytes": coll.bw_bytes(c, dt.size, self.s.size),
                            "busbw_factor": coll.busbw_factor(self.s.size), **analysis}
        self.say(*tables.host_section(entry))
        with self._lock:
            self.doc["hosts"].append(entry)
            self.flush()

    def finish(self) -> None:
        self.set(end_time=now(), complete=True)

    def abandon(self, reason: str, exit: Optional[Dict[str, Any]] = None) -> str:
        """Write the document incomplete (exit: the job's verdict) and keep the lock; say what was kept."""
        if not self._lock.acquire(timeout=5):
            return "the results file is busy: left as last written"
        kept = f"{counted(len(self.doc['results']), 'row')} measured"
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

    def record_exit(self, verdict: Dict[str, Any]) -> None:
        """The job's verdict into the document, also after abandon() (which keeps the lock)."""
        if not self.abandoned:
            return self.set(exit=verdict)
        self.doc["exit"] = verdict
        self.flush()

    def flush(self) -> None:
        for f in self.files:
            f.write(self.doc)


def open_output(session: Session, command: str, args: argparse.Namespace) -> Optional[RunOutput]:
    """Rank 0 reserves the result files before anything is measured; all ranks agree."""
    out, error = None, None
    if session.rank == 0:
        try:
            out = RunOutput(session, command, args)
        except UsageError as exc:
            error = str(exc)
    session.agree(error)
    if out is not None:
        session.results = out
        if switches := faults.notice():     # MPIBENCH_FAULT set: the header and the document say so
            if getattr(args, "health", None):   # its stdout is the one line a plugin reads
                verdict.err(switches[0])
            else:
                out.say(switches[0])
            out.set(test_switches=switches[1])
        if getattr(session, "watch", None) is not None:
            session.watch.on_fault = out.abandon   # a hang or a signal: what was measured stays
    return out


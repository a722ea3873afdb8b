"""Result files: reserved before the benchmark, rewritten atomically as rows arrive.

An existing file is never overwritten: the next free numbered name beside it is used
(results.json -> results.1.json) and the caller says so. Files are created with mode
0666 less the user's umask, like any file the user's shell would create.
"""
import csv
import io
import json
import os

from ..errors import UsageError
from .document import MODES


def _numbered(path, k):
    root, ext = os.path.splitext(path)
    return f"{root}.{k}{ext}"


def replace_atomically(path, write):
    """write(tmp) fills a temporary file beside path, which then replaces path in one step,
    so a reader (or a kill) never sees half a file; the temporary never outlives a failure."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class ResultFile:
    def __init__(self, path, render):
        """render(doc) -> text. Reserves a fresh name now (UsageError if unwritable)."""
        self.requested = path
        self.render = render
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            raise UsageError(f"cannot write {path}: {folder} {what}")
        for k in range(0, 10000):
            candidate = path if k == 0 else _numbered(path, k)
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            except OSError as exc:
                raise UsageError(f"cannot write {path}: {exc.strerror}") from None
            os.close(fd)
            self.path = candidate
            return
        raise UsageError(f"cannot write {path}: too many numbered files beside it")

    @property
    def renamed(self):
        return self.path != self.requested

    def write(self, doc):
        def text(tmp):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            with os.fdopen(fd, "w") as f:
                f.write(self.render(doc))
                f.flush()
                os.fsync(f.fileno())
        replace_atomically(self.path, text)


def render_json(doc):
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


CSV_FIELDS = ("collective", "backend", "size", "count", "type", "redop", "root", "mode",
              "time_us", "algbw_GBps", "busbw_GBps", "nwrong")


def csv_rows(doc):
    """One list of CSV_FIELDS values per row and mode."""
    for row in doc.get("results", []):
        for mode in MODES:
            m = row.get(mode)
            if m is None:
                continue
            yield [row["collective"], row.get("backend", ""), row["size"], row["count"],
                   row["type"], row["redop"], row["root"], mode, m["time_us"],
                   m["algbw_GBps"], "" if m["busbw_GBps"] is None else m["busbw_GBps"],
                   "" if m["nwrong"] is None else m["nwrong"]]


def render_csv(doc):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    w.writerows(csv_rows(doc))
    return out.getvalue()

"""Result files: reserved before the benchmark under a name no file has (FILE, else FILE.0,
FILE.1, ... as nccl-tests' -J does), then brought up to date as rows arrive: a new row is
written in place, any other change replaces the file whole (docs/results-document.md).
"""
import csv
import io
import json
import os
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import UsageError
from .document import measurements

SYNC_SECONDS = 1.0


def replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """write(tmp) fills a file beside path that then replaces it in one step (never half a file)."""
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


def write_whole(path: str, data: bytes, mode: int) -> None:
    """data (bytes) replaces path with mode in one rename, on disk (fsync) before it."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    replace_atomically(path, write)


class ResultFile:
    def __init__(self, path: str, render: Optional[Callable[[Dict[str, Any]], Union[str, List[str]]]],
                 kind: str = "JSON") -> None:
        """render(doc) -> text or its parts (None: the caller writes it); reserves a fresh name now."""
        self.requested = path
        self.render = render
        self.kind = kind
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            raise UsageError(f"cannot write {path}: {folder} {what}")
        for k in range(-1, 10000):
            candidate = path if k < 0 else f"{path}.{k}"
            try:
                self.fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue
            except OSError as exc:
                raise UsageError(f"cannot write {path}: {exc.strerror}") from None
            self.path = candidate
            break
        else:
            raise UsageError(f"cannot write {path}: too many numbered files beside it")
        if render is None:
            os.close(self.fd)
        self.parts: List[str] = []
        self.size, self.synced = 0, time.monotonic()

    def announcement(self) -> str:
        return f"# Writing {self.kind} output to {self.path}"

    def write(self, doc: Dict[str, Any]) -> None:
        assert self.render is not None
        rendered = self.render(doc)
        parts = [rendered] if isinstance(rendered, str) else rendered
        old, i, n = self.parts, 0, min(len(self.parts), len(parts))
        while i < n and old[i] == parts[i]:
            i += 1
        if old and i < len(old) - _closing(old):      # not an append: never two versions in one file
            data = "".join(parts).encode()
            write_whole(self.path, data, os.stat(self.path).st_mode & 0o777)
            os.close(self.fd)
            self.fd = os.open(self.path, os.O_WRONLY)
            self.parts, self.size, self.synced = parts, len(data), time.monotonic()
            return
        same = _common_start(old[i], parts[i]) if i < n else ""
        head = "".join(parts[:i] + [same])
        offset = len(head) if head.isascii() else len(head.encode())
        data = "".join([parts[i][len(same):]] + parts[i + 1:]).encode() if i < len(parts) else b""
        end = offset + len(data)
        if end < self.size and parts and parts[0].startswith("{"):
            data += b" " * (self.size - end)      # JSON may end in spaces, never cut short
            end = self.size
        _write_at(self.fd, data, offset)
        if end < self.size:
            os.ftruncate(self.fd, end)
        self.parts, self.size = parts, end
        if doc.get("end_time") is not None or time.monotonic() - self.synced >= SYNC_SECONDS:
            os.fsync(self.fd)
            self.synced = time.monotonic()


# the parts after a JSON document's last row: its list's end, the ENDING fields, the brace
_CLOSING = ("\n ]", ',\n "', "\n}")


def _closing(parts: List[str]) -> int:
    """How many parts at the end are closing lines (none for CSV: one part a line)."""
    return next((k for k in range(len(parts)) if not parts[-1 - k].startswith(_CLOSING)), len(parts))


def _common_start(a: str, b: str, step: int = 4096) -> str:
    n, k = min(len(a), len(b)), 0
    while k + step <= n and a[k:k + step] == b[k:k + step]:
        k += step
    while k < n and a[k] == b[k]:
        k += 1
    return a[:k]


def _write_at(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done


# id(element) -> (element, its JSON), forgotten once a second and when a document ends
_ENCODED: Dict[int, Tuple[Any, str]] = {}
_ENCODED_SINCE = [0.0]


def _encode(value: Any, cache: bool) -> str:
    hit = _ENCODED.get(id(value)) if cache else None
    if hit is None or hit[0] is not value:
        hit = (value, json.dumps(value, allow_nan=False))
        if cache:
            _ENCODED[id(value)] = hit
    return hit[1]


# the fields a document's end sets: after the rows, so that ending rewrites only them
ENDING = ("end_time", "complete", "incomplete", "exit")


def json_parts(doc: Dict[str, Any], cache: bool = True) -> List[str]:
    """doc as JSON in parts: a line per field and per row, ENDING last (cache: keep rows' text)."""
    now = time.monotonic()
    if doc.get("end_time") is not None or now - _ENCODED_SINCE[0] >= SYNC_SECONDS:
        _ENCODED.clear()
        _ENCODED_SINCE[0] = now
    def rows(value: Any) -> bool:
        return isinstance(value, list) and any(isinstance(x, (dict, list)) for x in value)
    def order(key: str) -> int:
        return 3 if key in ENDING else 2 if key == "results" else rows(doc[key])
    parts = ["{"]
    for n, key in enumerate(sorted(doc, key=order)):
        value = doc[key]
        head = f"{',' if n else ''}\n {json.dumps(key)}: "
        if rows(value):
            parts.append(head + "[")
            for k, item in enumerate(value):
                parts += [",\n  " if k else "\n  ", _encode(item, cache)]
            parts.append("\n ]")
        else:
            parts.append(head + json.dumps(value, allow_nan=False))
    parts.append("\n}\n")
    return parts


CSV_FIELDS = ("collective", "backend", "size", "count", "type", "redop", "root", "mode",
              "time_us", "algbw_GBps", "busbw_GBps", "nwrong")


def csv_rows(doc: Dict[str, Any]) -> Iterator[List[Any]]:
    """One list of CSV_FIELDS values per row and mode."""
    for row, mode, m in measurements(doc):
        yield [row["collective"], row.get("backend", ""), row["size"], row["count"],
               row["type"], row["redop"], row["root"], mode, m["time_us"],
               m["algbw_GBps"], "" if m["busbw_GBps"] is None else m["busbw_GBps"],
               "" if m["nwrong"] is None else m["nwrong"]]


def render_csv(doc: Dict[str, Any]) -> List[str]:
    return csv_lines((CSV_FIELDS, *csv_rows(doc)))


def csv_lines(lines: Iterable[Sequence[Any]]) -> List[str]:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    parts = []
    for line in lines:
        w.writerow(line)
        parts.append(out.getvalue())
        out.seek(0)
        out.truncate()
    return parts

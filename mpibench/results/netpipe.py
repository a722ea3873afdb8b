"""NetPIPE's printed output (NPmpi / Debian's NPopenmpi 3.7), read as a results document:
bytes / usec is one direction's rate, mpibench's sendrecv algbw = busbw; Mbps is kept in the
row, never used (docs/verify.md). The -o file does not say which mode made it: read the printed output.
"""
import re
from typing import Any, Dict

from .nccltests import Unreadable, document, mode_figures, row_of

_LINE = re.compile(r"(?:^|[\s>:])\s*(\d+):\s+(\d+)\s+bytes\s+(\d+)\s+times\s+-->\s+"
                   r"([0-9.]+)\s+Mbps\s+in\s+([0-9.]+)\s+usec")


def looks_like_text(text: str) -> bool:
    return _LINE.search(text[:20000]) is not None


def parse_text(text: str) -> Dict[str, Any]:
    """NetPIPE's printed output -> results document (Unreadable when it has no rows)."""
    rows: Dict[int, Dict[str, Any]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not (m := _LINE.search(line)):
            continue
        size, times, mbps, usec = int(m.group(2)), int(m.group(3)), float(m.group(4)), float(m.group(5))
        if not usec > 0 or size < 1:
            raise Unreadable(f"line {n}: a time or size that is not above 0")
        gbps = size / usec / 1e3
        row = row_of("sendrecv", size, size, "uint8", "none", -1,
                     {"out_of_place": mode_figures(usec, gbps, gbps, None)}, None)
        rows[size] = dict(row, backend="mpi", netpipe={"repeats": times, "Mbps": mbps})
    if not rows:
        raise Unreadable("no NetPIPE lines (N: BYTES bytes TIMES times --> X Mbps in T usec)")
    return document([rows[s] for s in sorted(rows)], [], None, "NetPIPE NPmpi", None,
                    "read from NetPIPE's printed output: time = one transfer, bytes / time "
                    "= one direction (sendrecv algbw)", source="NetPIPE")

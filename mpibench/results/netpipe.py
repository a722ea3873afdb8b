"""NetPIPE's printed output (NPmpi / Debian's NPopenmpi 3.7), read as a results document.

Each measured size prints `24: 4194304 bytes   20 times -->   6897.45 Mbps in   9278.80 usec`.
usec is one transfer (half the ping-pong's round trip, or one exchange with -2); bytes are
what one rank sends, so bytes / usec is one direction's rate in both modes: mpibench's
sendrecv algbw (and busbw, factor 1). Mbps (2^20 bits/s, both directions with -2) is kept
in the row, never used. Launchers' `[1,0]<stdout>:` prefixes are allowed. (The -o file
does not say which mode made it: read the printed output.)
"""
import re
from typing import Any, Dict

from .nccltests import Unreadable, document

_LINE = re.compile(r"(?:^|[\s>:])\s*(\d+):\s+(\d+)\s+bytes\s+(\d+)\s+times\s+-->\s+"
                   r"([0-9.]+)\s+Mbps\s+in\s+([0-9.]+)\s+usec")


def looks_like_text(text: str) -> bool:
    return _LINE.search(text[:20000]) is not None


def parse_text(text: str) -> Dict[str, Any]:
    """NetPIPE's printed output -> results document (Unreadable when it has no rows)."""
    rows: Dict[int, Dict[str, Any]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE.search(line)
        if not m:
            continue
        size, times, mbps, usec = int(m.group(2)), int(m.group(3)), float(m.group(4)), float(m.group(5))
        if not usec > 0 or size < 1:
            raise Unreadable(f"line {n}: a time or size that is not above 0")
        gbps = size / usec / 1e3
        rows[size] = {"collective": "sendrecv", "backend": "mpi", "size": size, "count": size,
                      "type": "uint8", "dtype": "uint8", "redop": "none", "root": -1,
                      "netpipe": {"repeats": times, "Mbps": mbps},
                      "out_of_place": {"time_us": usec, "algbw_GBps": gbps, "busbw_GBps": gbps,
                                       "nwrong": None},
                      "in_place": None}
    if not rows:
        raise Unreadable("no NetPIPE lines (N: BYTES bytes TIMES times --> X Mbps in T usec)")
    doc: Dict[str, Any] = document(
        [rows[s] for s in sorted(rows)], [], None, "NetPIPE NPmpi", None,
        "read from NetPIPE's printed output: time = one transfer, bytes / time "
        "= one direction (sendrecv algbw)")
    doc["source"] = "NetPIPE"
    return doc

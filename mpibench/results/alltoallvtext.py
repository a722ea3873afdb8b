"""alltoallv's per-rank summary under each of its rows: what nccl-tests 2.19 prints with
NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1 (each rank's bytes, and the bandwidth its larger
direction gives at the row's time), with the rank's host and its own time added."""
from typing import Any, Dict, List, Optional, Sequence

from ..measure.collectives.base import algbw, busbw
from ..measure.dtypes import DTYPES

MODE = "out_of_place"       # alltoallv has no in-place call


def settings(traffic: Any, n: int) -> Dict[str, Any]:
    """The document's 'alltoallv': how its traffic was made (a measure.collectives.traffic.Traffic)."""
    if traffic.generated:
        return {"mode": "generated", "spread": traffic.spread, "text": traffic.describe(n)}
    return {"mode": "matrix", "matrix_file": traffic.source, "matrix_dim": traffic.dim or len(traffic.matrix),
            "scale": traffic.scale, "matrix": [list(r) for r in traffic.matrix],
            "text": traffic.describe(n)}


def summary(row: Dict[str, Any], hosts: Sequence[str], traffic: Optional[Dict[str, Any]]) -> List[str]:
    moved, figures = row.get("per_rank_bytes"), row.get(MODE)
    if not moved or not figures:
        return []
    n, seconds = len(moved["send"]), figures["time_us"] / 1e6
    factor = row.get("busbw_factor") or 0.0
    how = (f"mode=generated nranks={n} total_bytes={row['count'] * n * _elsize(row)} "
           f"spread={traffic['spread']:.3f}" if traffic and traffic["mode"] == "generated" else
           f"mode=matrix nranks={n} matrix_dim={traffic['matrix_dim']} scale={traffic['scale']:.3f}"
           if traffic else f"nranks={n}")
    lines = [f"# alltoallv summary: {how} time_usec={figures['time_us']:.2f}"]
    own = (row.get("per_rank_time_us") or {}).get(MODE) or [None] * n
    for r, (sent, got) in enumerate(zip(moved["send"], moved["recv"])):
        alg = algbw(max(sent, got), seconds)
        bus = busbw(alg, factor)
        lines.append(f"#   rank={r} host={hosts[r] if r < len(hosts) else '?'} send_bytes={sent} "
                     f"recv_bytes={got} alg_bw={alg or 0:.2f} bus_bw={bus or 0:.2f}"
                     + (f" rank_time_usec={own[r]:.2f}" if own[r] is not None else ""))
    return lines


def _elsize(row: Dict[str, Any]) -> int:
    dt = DTYPES.get(row.get("dtype", ""))
    return dt.size if dt else 0

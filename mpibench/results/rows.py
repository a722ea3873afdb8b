"""One row of a results document: what identifies it (key), and the row itself from every
rank's time, for the commands that time one collective at a time outside a sweep
(allreduce, latency, flagsync, demo, check, p2p): the same shape as a row of `run` (nccl-tests'
keys, one mode), so that report, compare and plot read every command's file alike."""
from statistics import mean
from typing import Any, Dict, Optional, Sequence, Tuple

from ..measure.collectives.base import Collective, Counts, algbw, busbw
from ..measure.dtypes import DType
from ..measure.modes import MODES


def key(row: Dict[str, Any], mode: Optional[str] = None, backend: bool = True) -> Tuple[Any, ...]:
    """What lines a row up: across trials (mode None), files (compare), backends (backend False)."""
    return (row["collective"], row.get("backend", "?") if backend else None,
            row.get("dtype", row["type"]), row["redop"], row["root"],
            row.get("setting", "") + row.get("link", ""), row["size"], mode)


def one_mode(collective: str, backend: str, dtype: DType, size: int, count: int, redop: str,
             root: int, bw_bytes: Optional[int], factor: float, mode: str, seconds: Sequence[float],
             wrong: Optional[Sequence[Optional[int]]] = None, **extra: Any) -> Dict[str, Any]:
    """A row measured in one mode (in_place or out_of_place). seconds[r]: rank r's time per call,
    their mean the row's (nccl-tests' -a 1); wrong[r]: rank r's wrong elements (None: not
    checked); bw_bytes None: no bandwidth is defined for what was timed."""
    assert mode in MODES, mode
    t = mean(seconds)
    alg = algbw(bw_bytes, t) if bw_bytes is not None else None
    checked = wrong is not None and any(w is not None for w in wrong)
    figures = {"time_us": t * 1e6, "algbw_GBps": alg,
               "busbw_GBps": busbw(alg, factor) if alg is not None else None,
               "nwrong": sum(w or 0 for w in wrong or []) if checked else None}
    row: Dict[str, Any] = {"collective": collective, "backend": backend, "size": size, "count": count,
           "type": dtype.label, "dtype": dtype.name, "redop": redop, "root": root,
           "bw_bytes": bw_bytes, "busbw_factor": factor,
           "out_of_place": None, "in_place": None, mode: figures,
           "per_rank_time_us": {mode: [s * 1e6 for s in seconds]},
           "per_rank_nwrong": {mode: list(wrong) if wrong is not None else [None] * len(seconds)}}
    row.update(extra)
    return row


def of_collective(coll: Collective, backend: str, dtype: DType, c: Counts, n: int, redop: str,
                  root: int, mode: str, seconds: Sequence[float],
                  wrong: Optional[Sequence[Optional[int]]] = None, **extra: Any) -> Dict[str, Any]:
    """one_mode() for a collective module's counts c (nccl-tests' size, count and bytes)."""
    return one_mode(coll.name, backend, dtype, max(c.send, c.recv) * dtype.size, c.param, redop,
                    root, coll.bw_bytes(c, dtype.size, n), coll.busbw_factor(n), mode, seconds,
                    wrong, **extra)

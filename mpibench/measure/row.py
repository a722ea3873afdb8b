"""A row of the results document: one collective, dtype, op and size measured, in
nccl-tests' shape, the same in every command. One comment per field says what it holds and
its unit; a Range says what a file read back may hold (results/schema.py checks it)."""
import math
from typing import Annotated, Any, Dict, List, NamedTuple, Optional, TypedDict

MAX_SIZE = 1 << 50          # 1 PiB: no collective buffer is larger
MAX_RANKS = 1 << 20


class Range(NamedTuple):
    low: float
    high: float = math.inf


Bytes = Annotated[int, Range(0, MAX_SIZE)]
Elements = Annotated[int, Range(0, MAX_SIZE * MAX_RANKS)]
Micros = Annotated[float, Range(0, 1e12)]
GBps = Annotated[float, Range(0, 1e9)]


class Spread(TypedDict):
    trials: int                     # how many trials measured the row
    time_us_min: Annotated[float, Range(math.ulp(0.0), 1e12)]   # the fastest trial's time, us
    time_us_max: Annotated[float, Range(math.ulp(0.0), 1e12)]   # the slowest trial's time, us
    cv: Optional[float]             # the times' population stdev / their mean
    range: float                    # (max - min) / median of the times
    busbw_GBps_min: Optional[float]  # the trials' lowest and highest busbw, GB/s; null: not defined
    busbw_GBps_max: Optional[float]


class _Figures(TypedDict):
    time_us: Micros                 # time per call, us: the ranks' mean (-a picks another)


class Figures(_Figures, total=False):
    """One mode's figures: a row's out_of_place or in_place."""
    algbw_GBps: Optional[GBps]      # bw_bytes / time_us, GB/s (1e9 B/s); null: no bandwidth defined
    busbw_GBps: Optional[GBps]      # algbw_GBps x busbw_factor, GB/s; null: no bandwidth defined
    nwrong: Optional[Elements]      # wrong elements over every rank; null: not checked
    max_error: float                # a nccl-tests log before 2.13: its largest error, in nwrong's place
    in_flight: Optional[int]        # calls in flight at once in the timed loop (-z 0), else 1
    launch_bound: bool              # GPUs: time_us within 1.5x of the cost of launching one call
    per_iter: Dict[str, Any]        # -I 1: nccl-tests' per-iteration report (measure/iterstats.py), us
    spread: Spread                  # --trials: how the trials' times spread
    unstable: bool                  # --trials: the trials' times span more than unstable_threshold


class _Row(TypedDict):
    collective: str                 # all_reduce, ..., sendrecv; flagsync's all_gather_object
    size: Bytes                     # nccl-tests' size column, B
    count: Bytes                    # nccl-tests' count column, elements
    type: str                       # nccl-tests' type label (float)
    redop: str                      # the reduction op; none where the collective takes none
    root: Annotated[int, Range(-1, MAX_RANKS)]  # the root rank; -1: none


# The classic commands' own fields (docs/commands/<command>.md); demo's "pass" is a keyword.
_Demo = TypedDict("_Demo", {
    "ranks": List[Dict[str, Any]],  # demo: per rank: rank, label, before, after, pass
    "expected": List[int],          # demo: what every rank should hold after the call
    "pass": bool,                   # demo: every rank held it
}, total=False)


class _Classic(_Demo, total=False):
    calls: int                      # latency: calls timed as one (1 or K); flagsync: calls timed
    method: str                     # flagsync: how the flags are summed (its collective)
    sums: List[int]                 # flagsync: each rank's sum of the flags
    agrees: bool                    # flagsync: every rank's sum is the expected one
    time_per_call_us: float         # flagsync: the ranks' mean time per call, us
    slowest_rank_time_per_call_us: float
    speedup_vs_all_gather_object: Optional[float]   # flagsync: all_gather_object's time / this one's
    total_s: float                  # flagsync: time_per_call_us x calls, s


class Row(_Row, _Classic, total=False):
    backend: str                    # gloo, nccl, mpi
    dtype: str                      # the dtype's name (float32)
    requested_size: Bytes           # run: the size asked for, B, before rounding to whole elements
    bw_bytes: Optional[Elements]    # S in algbw = S / t, B; null: no bandwidth defined (a time only)
    busbw_factor: Optional[Annotated[float, Range(0, 2)]]  # busbw = algbw x this (FIELD-NOTES 2)
    out_of_place: Optional[Figures]  # null: the mode was not measured
    in_place: Optional[Figures]     # null: the mode was not measured
    per_rank_time_us: Dict[str, List[Micros]]   # per mode key: every rank's time per call, us
    per_rank_nwrong: Dict[str, List[Optional[int]]]  # per mode key: every rank's wrong elements
    per_rank_bytes: Dict[str, List[Bytes]]  # alltoallv: "send" and "recv", every rank's bytes, B
    trials: List[Dict[str, Any]]    # --trials: each trial's modes and per-rank figures
    unstable_threshold: float       # --trials: the share of the median a stable row's times span
    test: int                       # a nccl-tests log of several tests: the row's, from 1
    setting: str                    # sweep: the setting that measured the row
    link: str                       # p2p: the link, from->to

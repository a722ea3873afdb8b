"""The results document's header and per-host figures as types (a row's are in
measure/row.py), one comment per field, and the check of a file read back against them:
a value of the wrong type, a number outside its Range, a required key missing. Keys a type
does not name are kept unchecked (commands add their own sections)."""
import functools
import math
from typing import (Annotated, Any, Dict, List, Literal, Optional, TypedDict, Union,
                    get_args, get_origin, get_type_hints)

from ..measure.row import MAX_RANKS, Range, Row


Doc = Dict[str, Any]    # a results document as JSON, with what commands add to it (Document below)


class Bad(Exception):
    """A problem at a place in the document (turned into one UsageError by reader.load)."""


class RankFigures(TypedDict):
    rank: int
    host: str
    median_s: float                 # the rank's median probe iteration, s
    slow_iterations: int            # iterations over threshold x that iteration's median rank
    threshold: float                # the ratio to the median beyond which an iteration is slow


class HostFigures(TypedDict):
    host: str
    ranks: List[int]                # the host's ranks
    min_s: float                    # fastest, median and slowest of its ranks' medians, s
    median_s: float
    max_s: float
    slowest_rank: int
    ratio: Optional[float]          # median over iterations of its slowest rank / the median host
    slow_iterations: int            # iterations over threshold x the median host
    threshold: float


class HostAnalysis(TypedDict):
    """Who is slow in one per-host probe (diagnose/stragglers.py)."""
    iterations: int                 # probe iterations every rank timed
    margin: float                   # slower than the median by more than this share: slow
    consistency: float              # ... in at least this share of the iterations
    ranks: List[RankFigures]
    median_rank_s: float            # the median of the ranks' medians, s
    slowest: Dict[str, Any]         # the slowest rank: rank, host, median_s, ratio to the median
    hosts: List[HostFigures]
    slow_hosts: List[str]
    slow_ranks: List[int]
    pairs: List[Dict[str, Any]]     # of exactly two: the one consistently slower (what, slower, ...)


class HostEntry(HostAnalysis):
    """One collective's per-host probe at the largest size (a results document's `hosts`)."""
    collective: str
    size: int                       # B
    type: str
    dtype: str
    redop: str
    mode: str                       # out or in
    symmetric: bool                 # every rank sends and receives alike (a slow host is comparable)
    bw_bytes: Optional[int]         # as a row's
    busbw_factor: float


# ---- train (times in s; a job's step time: its slowest rank's per step, then the median) ----
Count = Annotated[int, Range(1)]
Seconds = Annotated[float, Range(0)]
Positive = Annotated[float, Range(math.ulp(0.0))]


class Model(TypedDict):
    preset: str                     # tiny, gpt2, ...
    layers: Count
    hidden: Count                   # width of the hidden state
    heads: Count
    seq: Count                      # tokens per sample
    vocab: Count
    parameters: Count


class Step(TypedDict):
    step: int                       # 1, 2, ... (the warm-up steps are not kept)
    synced_s: Optional[List[Seconds]]   # per rank: the step with gradients synchronized
    unsynced_s: Annotated[List[Seconds], Range(1)]  # per rank: the same step without (compute alone)
    loss: List[Optional[float]]     # per rank; null: not finite


class _Summary(TypedDict):
    step_s: Positive                # the job's median step time
    compute_s: Positive             # ... without synchronizing gradients
    tokens_per_s: Positive          # over the job
    samples_per_s: Positive


class Summary(_Summary, total=False):   # trainfigures.figures(), once the steps are done
    exposed_s: Optional[float]      # step_s - compute_s: the communication the step waits for
    exposed_share: Optional[float]  # exposed_s / step_s
    alone_s: Optional[float]        # the step's collectives timed alone, one after another
    hidden_share: Optional[float]   # the share of alone_s the step overlaps with compute
    gradient_bytes: Optional[int]   # B the step's all_reduce and reduce_scatter calls carry
    bus_bytes: Optional[float]      # B the step's calls move, each size x count x busbw factor
    busbw_GBps: Optional[float]     # bus_bytes / alone_s, GB/s


class _Train(TypedDict):
    model: Model
    parallel: Literal["ddp", "fsdp", "none"]
    batch_per_rank: Count           # samples per rank per step
    steps: List[Step]


class Train(_Train, total=False):
    bucket_mb: Any                  # --bucket-mb (DDP's gradient buckets, MB)
    precision: str
    warmup: int                     # untimed steps first
    timed: Count                    # timed steps of each kind (--steps)
    summary: Optional[Summary]
    hosts: Optional[HostAnalysis]   # who is slow, from the step times
    collectives: List[Dict[str, Any]]   # one step's calls: collective, size (B), count
    memory: List[Dict[str, Any]]    # per rank: rank, host, peak_bytes (of memory_kind)
    memory_kind: Literal["cuda_max_memory_allocated", "peak_rss_growth"]
    replicas: Optional[Dict[str, Any]]  # the replicas' loss on one batch: loss per rank, agree, rtol, spread
    scaling: Optional[Dict[str, Any]]   # against --scale-from


class _World(TypedDict):
    size: Annotated[int, Range(1, MAX_RANKS)]   # ranks


class World(_World, total=False):   # and launcher, backend(s), rendezvous, barrier: as printed
    hosts: List[str]                # in rank order, each once


class OutOfBounds(TypedDict):
    count: Annotated[int, Range(0)]     # wrong elements over every row
    okay: bool


class MinBusbw(TypedDict):
    GBps: Annotated[float, Range(0)]    # the threshold, GB/s
    source: str                     # where it comes from (--min-busbw X, 0.9 x NCCL_TESTS_MIN_BW=X)
    okay: bool                      # every backend's average bus bandwidth reached it


class _Header(TypedDict):
    version: int                    # format version: document.FORMAT_VERSION
    tool: str                       # "mpibench"
    mpibench_version: str           # the version that wrote it
    start_time: str                 # ISO 8601 with the time zone
    complete: bool                  # false while running, and for a job that did not finish
    results: List[Row]              # the rows, in the order measured


class Document(_Header, total=False):
    command: str                    # run, ..., sweep; "nccl-tests X_perf" when read from nccl-tests
    end_time: Optional[str]         # ISO 8601; null until the command ends
    incomplete: Optional[str]       # why a job did not finish (hang, signal, a failed rank)
    exit: Dict[str, Any]            # a job that did not finish: its exit code and status
    argv: List[str]                 # the command line
    args: Dict[str, Any]            # every option's value
    hosts: List[HostEntry]          # run's per-host probes, one per collective
    notes: List[str]                # lines a reader should see again (also printed with "# ")
    world: Optional[World]          # where the job ran
    config: Dict[str, Any]          # the settings, and devices: one record per rank
    versions: Dict[str, Dict[str, Any]]     # per host: mpibench, python, torch, nccl, mpi4py, mpi
    env: Dict[str, str]             # the NCCL_, GLOO_, UCX_ and OMPI_MCA_ variables set
    trials: Count                   # run --trials (-N); allreduce -n: its timed calls
    memory: List[Dict[str, Any]]    # run: per rank: rank, host, peak_rss_bytes, buffer_bytes, ...
    device_memory: Dict[str, Dict[str, Any]]    # run on GPUs, per backend: the room -e left NCCL
    graph_buffers: Dict[str, Dict[str, Any]]    # run -G, per backend: allocator, registered, reason
    launch_cost_us: Dict[str, Dict[str, float]]     # run on GPUs: {backend: {collective: us a call}}
    call_notes: List[Dict[str, str]]    # run: backend, collective, how torch's call differs (note)
    comparison: Dict[str, Any]      # run with two backends: backends [a, b], memory, rows side by side
    average_bus_bandwidth: Optional[Annotated[float, Range(0)]]  # nccl-tests' closing figure, GB/s
    out_of_bounds: OutOfBounds      # nccl-tests' closing figure
    min_busbw: MinBusbw             # run --min-busbw or NCCL_TESTS_MIN_BW
    line_rate_gbps: Dict[str, Optional[Annotated[float, Range(0)]]]  # per host, Gbit/s; null: none reported
    path_limits: Dict[str, Any]     # run, check: hosts (each one's paths), limit, why, findings
    published: Dict[str, Any]       # run, check: platform, collectives {name: [matching entries]}
    train: Train                    # train: the model, the steps and their figures
    source: Literal["nccl-tests", "NetPIPE"]    # read from that tool's output
    tests: List[Dict[str, Any]]     # a nccl-tests log's tests: test, name, collective, line, ranks, ...


def check(value: Any, kind: Any, where: str = "") -> None:
    """Bad (saying where) unless value is of kind: a type above or in measure/row.py."""
    bounds = None
    if get_origin(kind) is Annotated:
        kind, bounds = get_args(kind)[0], get_args(kind)[1]
    origin, params = get_origin(kind), get_args(kind)
    if kind is Any or origin is Union and value is None and type(None) in params:
        return
    if origin is Union:             # Optional[X]
        return check(value, params[0], where)
    if origin is Literal:
        if value not in params:
            raise Bad(f"{where}: {value!r} is not {' or '.join(map(str, params))}")
        return
    if isinstance(kind, type) and issubclass(kind, dict) and hasattr(kind, "__required_keys__"):
        return _check_record(value, kind, where)
    base = get_origin(kind) or kind
    if isinstance(value, bool) != (base is bool) or not isinstance(value, _KINDS.get(base, base)):
        raise Bad(f"{where}: {_kind(value)}, expected {_NAMES[base]}")
    if base in (list, dict):
        _check_items(value, params, bounds, where)
    elif base in (int, float):
        _check_number(value, bounds, where)


def _check_items(value: Any, params: Any, bounds: Any, where: str) -> None:
    """A list's items (at least its Range's low) or an object's values, each of its type."""
    if isinstance(value, dict):
        for key, item in value.items():
            check(item, params[1], f"{where}.{key}")
        return
    if bounds is not None and len(value) < bounds.low:
        raise Bad(f"{where}: fewer than {bounds.low:g} items")
    for i, item in enumerate(value):
        check(item, params[0], f"{where}[{i}]")


def _check_record(value: Any, kind: Any, where: str) -> None:
    """A TypedDict: an object with its required keys, each key it names of its type."""
    if not isinstance(value, dict):
        raise Bad(f"{where or 'the top level'}: {_kind(value)}, expected an object")
    if missing := sorted(kind.__required_keys__ - value.keys()):
        raise Bad(f"{where or 'file'}: missing {missing[0]!r}")
    for key, hint in _hints(kind).items():
        if key in value:
            check(value[key], hint, f"{where}.{key}" if where else key)


def _check_number(value: float, bounds: Any, where: str) -> None:
    """Finite and within the bounds of its Range, if any."""
    if isinstance(value, float) and not math.isfinite(value) or \
            bounds is not None and not bounds.low <= value <= bounds.high:
        low, high = bounds or (-math.inf, math.inf)
        raise Bad(f"{where}: {value} is out of range ({low:g} to {high:g})")


@functools.lru_cache(maxsize=None)
def _hints(kind: Any) -> Dict[str, Any]:
    return get_type_hints(kind, include_extras=True)


_KINDS: Dict[Any, Any] = {float: (int, float)}
_NAMES = {int: "integer", float: "number", str: "string", list: "list", dict: "object",
          bool: "true/false"}


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__

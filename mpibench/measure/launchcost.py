"""The host's cost of starting one collective, what a row's time cannot go below
(docs/gpu.md). Measured as nccl-tests' -z 0 loop without the final synchronize: the clock
stops when the last call returns.
"""
import time
from typing import Any, Callable, Dict, List, Optional

from .backends.torchdist import TorchBackend
from .collectives import REGISTRY
from .collectives.base import Call, Collective, Ctx
from .dtypes import DTYPES
from .modes import MODES
from .row import Row

# A row whose time per call is within this factor of the launch cost is launch-bound.
LAUNCH_BOUND_FACTOR = 1.5

LAUNCH_BOUND_NOTE = (f"time per call within {LAUNCH_BOUND_FACTOR:g}x of the host's launch "
                     "cost ('launch_bound' in the JSON), so they show how fast torch starts "
                     "calls, not NCCL's latency; -G (CUDA graph replays) removes most of that "
                     "cost")


def per_call_seconds(call: Call, n: int, finish: Optional[Callable[[List[Any]], Any]] = None) -> float:
    """Host seconds per launch of n calls issued without waiting; finish(results), after
    the clock stops, completes what they returned."""
    if n < 1:
        raise ValueError("n must be at least 1")
    results: List[Any] = [None] * n
    perf = time.perf_counter
    t0 = perf()
    for i in range(n):
        results[i] = call()
    seconds = perf() - t0
    if finish is not None:
        finish(results)
    return seconds / n


def wait_all(results: List[Any]) -> None:
    for work in results:
        if work is not None:
            work.wait()


def launch_bound(time_s: float, per_call_s: Optional[float]) -> bool:
    """Whether time_s is within LAUNCH_BOUND_FACTOR x of a measured launch cost."""
    return per_call_s is not None and per_call_s > 0 and time_s <= LAUNCH_BOUND_FACTOR * per_call_s


def mark_rows(rows: List[Row], per_call_s: Optional[float]) -> int:
    """Set "launch_bound" in each measured mode of each row; how many were."""
    if per_call_s is None:
        return 0
    marked = 0
    for row in rows:
        for key in MODES:
            if m := row.get(key):
                m["launch_bound"] = launch_bound(m["time_us"] * 1e-6, per_call_s)
                marked += m["launch_bound"]
    return marked


LAUNCHES = 200       # calls timed at start-up: a few milliseconds on a GPU
WARM = 10            # calls first, untimed (connections, first-use costs)


def row_cost(costs: Optional[Dict[str, float]], collective: str, graph: int) -> Optional[float]:
    """The launch cost a row of `collective` is marked against; None with -G, where one
    graph launch starts every captured call."""
    return None if graph or not costs else costs.get(collective)


def of_collective(backend: TorchBackend, coll: Collective, barrier: Call, root: int = 0,
                  n: int = LAUNCHES) -> float:
    """Host seconds per launch of coll at its smallest row, every rank together; on a GPU
    bound as the timed loops bind them, elsewhere async_op=True."""
    torch, dist = backend.torch, backend.dist
    dt, ranks = DTYPES["float32"], dist.get_world_size()
    c = coll.counts(4 * ranks, dt.size, ranks)
    in_place = "out" not in backend.modes(coll)      # in place only: send and recv are one
    op = "sum" if coll.reduces else "none"
    ctx = Ctx(rank=dist.get_rank(), n=ranks, root=root if coll.rooted else -1, op=op, dtype=dt,
              count=c.param, in_place=in_place, backend_op=backend.ops.get(op), device=backend.device)
    recv = torch.zeros(max(c.send, c.recv), device=backend.device)
    send = recv if in_place else torch.zeros(c.send, device=backend.device)
    call = backend.bind(coll, send, recv[:c.recv], ctx, not backend.cuda)
    finish: Callable[[List[Any]], Any] = ((lambda _: backend.stream.synchronize()) if backend.cuda
                                          else wait_all)
    for _ in range(WARM):
        finish([call()])
    barrier()
    return per_call_seconds(call, n, finish)


def of_backend(backend: TorchBackend, barrier: Call, n: int = LAUNCHES) -> float:
    """of_collective for the cheapest call there is: the smallest all_reduce."""
    return of_collective(backend, REGISTRY["all_reduce"], barrier, n=n)

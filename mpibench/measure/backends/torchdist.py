"""torch.distributed as a benchmark backend: NCCL on CUDA devices, gloo on CPUs.

On GPUs every call runs on one non-blocking stream of the backend's own, current from its
creation on, not on the legacy default stream (docs/gpu.md, "One stream").
"""
import time
from contextlib import nullcontext
from operator import methodcaller
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ...launch.session import Session
from .. import switches
from . import timing
from .timing import Call, Sync, Wait
from ..collectives.base import Collective, Ctx, Tensor
from ..dtypes import DType

Timed = Tuple[float, Optional[List[float]]]    # seconds per call; -I 1: each iteration's
T = TypeVar("T")


def is_oom(torch: Any, exc: BaseException) -> bool:
    return isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in str(exc)


def error_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


class TorchBackend:
    def __init__(self, session: Session, name: Optional[str] = None, device: Any = None) -> None:
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.session = torch, dist, session
        backend = name or session.backend
        assert backend is not None      # made for a session with a process group, or named
        self.name: str = backend
        self.device = device or session.device
        self.cuda = self.device is not None and self.device.type == "cuda"
        self.pool: Any = None     # -G: the buffers' torch.cuda.MemPool (graph_allocator)
        if self.cuda:
            self.stream = torch.cuda.Stream(self.device)
            torch.cuda.set_stream(self.stream)
        self.ops: Dict[str, Any] = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                                    "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
                                    "avg": dist.ReduceOp.AVG}
        switches.install(self, session.rank)     # test switches, when on (launch/faults.py)

    # ---- what it can do ----
    def unsupported(self, coll: Collective, dtype: DType, op: str) -> Optional[str]:
        """Why this backend cannot run coll with dtype and op (None: it can)."""
        if op == "avg" and not dtype.floating and self.name != "nccl":
            return f"{self.name} cannot average {dtype.name} (avg needs a floating type)"
        return None

    missing_mode = "torch.distributed has no such call"

    def modes(self, coll: Collective) -> Sequence[str]:
        return coll.modes

    def bind(self, coll: Collective, send: Tensor, recv: Tensor, ctx: Ctx, async_op: bool) -> Call:
        return coll.bind(self.dist, send, recv, ctx, async_op)

    def allgather_object(self, obj: Any) -> Call:
        """A call gathering one picklable object from every rank."""
        out = [None] * self.session.size

        def call() -> List[Any]:
            self.dist.all_gather_object(out, obj)
            return out
        return call

    def default_blocking(self) -> int:
        """The -z mode when none is given: 0 on GPUs, as nccl-tests; 2 (wait for each call)
        on gloo, whose calls in flight run on several threads at once."""
        return 2 if not self.cuda else 0

    def launches_async(self, mode: int) -> bool:
        """Whether the calls for -z mode return a handle to wait for. On CUDA every call is
        bound with async_op=False: torch then makes the current stream wait for NCCL's stream,
        without blocking the host, so a sync of the current stream waits for all calls."""
        return mode == 0 and not self.cuda

    _wait = methodcaller("wait")      # completes one handle: a torch Work

    # ---- buffers ----
    def graph_allocator(self) -> Dict[str, Any]:
        """-G: the buffers from here on come from NCCL's allocator where torch offers it
        (docs/gpu.md); {"allocator", "registered", "reason"}: registered is None, as whether
        NCCL registered them during a capture is not checked."""
        torch = self.torch
        assert self.device is not None      # CUDA's
        try:
            group = self.dist.distributed_c10d._get_default_group()
            self.pool = torch.cuda.MemPool(group._get_backend(self.device).mem_allocator)
        except (AttributeError, RuntimeError) as exc:
            return {"allocator": "torch caching allocator", "registered": None, "reason": error_line(exc)}
        return {"allocator": "ncclMemAlloc", "registered": None, "reason": None}

    def alloc(self, nbytes: int) -> Tensor:
        with (nullcontext() if self.pool is None else self.torch.cuda.use_mem_pool(self.pool, self.device)):
            return self.torch.zeros(nbytes, dtype=self.torch.uint8, device=self.device)

    def typed(self, buf: Tensor, dtype: DType) -> Tensor:
        usable = buf.numel() - buf.numel() % dtype.size
        return buf[:usable].view(getattr(self.torch, dtype.name))

    def attempt(self, make: Callable[[], T]) -> Tuple[Optional[T], Optional[BaseException]]:
        """(make(), None), or (None, the out-of-memory error it raised); others propagate."""
        try:
            return make(), None
        except Exception as exc:
            # ncclMemAlloc's failure names NCCL's error, not the memory
            if not (is_oom(self.torch, exc) or (self.pool is not None and "ncclMemAlloc" in str(exc))):
                raise
            # without its traceback, which would keep the failed call's frame and what it
            # had allocated alive while the caller tries a smaller size
            return None, exc.with_traceback(None)

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def device_total_bytes(self) -> Optional[int]:
        return int(self.torch.cuda.get_device_properties(self.device).total_memory) if self.cuda else None

    def device_peak_bytes(self) -> Optional[int]:
        return int(self.torch.cuda.max_memory_allocated(self.device)) if self.cuda else None

    # ---- timing ----
    def time_loop(self, calls: Sequence[Call], mode: int = 2, barrier: Sync = None, window: int = 1,
                  graph_launches: int = 0, per_iter: bool = False) -> Timed:
        """(seconds per call, -I 1: each iteration's seconds) of every call run once in -z
        mode `mode` (timing.py); barrier: the side channel's (modes 1 and 3, graphs)."""
        if graph_launches:          # nccl-tests' -G: the calls captured once, replays timed
            graph, replay = self.captured(calls)     # graph: kept while replayed
            # Capture and instantiation take a different time on each rank: without this a
            # fast rank would time its wait for the slowest.
            barrier = timing.needed_barrier(barrier)
            barrier()
            total = timing.seconds([replay] * graph_launches, mode, self.stream.synchronize, barrier)
            return total / (len(calls) * graph_launches), None
        finish = self.stream.synchronize if self.cuda else None
        wait = self._wait if self.launches_async(mode) else None
        if per_iter:
            return self._time_marked(calls, mode, finish, barrier, wait, window)
        return timing.seconds(calls, mode, finish, barrier, wait, window) / len(calls), None

    def _time_marked(self, calls: Sequence[Call], mode: int, finish: Sync, barrier: Sync,
                     wait: Optional[Wait], window: int) -> Timed:
        """-I 1: host clock reads on CPUs; on GPUs CUDA events on the current stream, read
        after the loop (nccl-tests' recordEvents, getElapsedTimes)."""
        count = timing.marks_needed(len(calls), mode)
        if not self.cuda:
            total, stamps = timing.seconds_marked(calls, mode, [time.perf_counter] * count,
                                                  finish, barrier, wait, window)
            return total / len(calls), timing.intervals(stamps, mode)
        # Every event recorded once now: torch creates a CUDA event at its first record,
        # which must not happen inside the timed loop (nccl-tests' initEvents).
        events = [self.torch.cuda.Event(enable_timing=True) for _ in range(count)]
        for e in events:
            e.record(self.stream)
        self.stream.synchronize()
        total, _ = timing.seconds_marked(calls, mode, [e.record for e in events], finish,
                                         barrier, wait, window)
        events[-1].synchronize()
        pairs = (zip(events[0::2], events[1::2]) if mode == 3 else zip(events, events[1:]))
        return total / len(calls), [a.elapsed_time(b) / 1e3 for a, b in pairs]

    def captured(self, calls: Sequence[Call]) -> Tuple[Any, Call]:
        """(graph, replay) of the calls captured in a CUDA graph; keep the graph while
        replaying. Thread-local capture, as nccl-tests: NCCL may connect during capture, and
        other threads (torch's NCCL watchdog) keep using CUDA meanwhile."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
            for call in calls:
                call()
        torch.cuda.synchronize(self.device)
        return graph, graph.replay

    def time_each(self, call: Call, count: int, barrier: Call) -> List[float]:
        """Per-call seconds for count calls, each started together after a barrier."""
        perf = time.perf_counter
        sync = self.stream.synchronize if self.cuda else None
        out = [0.0] * count
        for k in range(count):
            barrier()
            t0 = perf()
            call()
            if sync is not None:
                sync()
            out[k] = perf() - t0
        return out

"""torch.distributed as a benchmark backend: NCCL on CUDA devices, gloo on CPUs.

The timed loops call pre-bound partials and nothing else: no allocation, no
bookkeeping, no printing between the two timestamps. On GPUs time is taken with
CUDA events; on CPUs with perf_counter.
"""
import time

from ...launch import faults
from ..dtypes import torch_dtype


class TorchBackend:
    def __init__(self, session):
        import torch
        import torch.distributed as dist
        self.torch = torch
        self.dist = dist
        self.session = session
        self.name = session.backend
        self.device = session.device
        self.cuda = self.device is not None and self.device.type == "cuda"
        self.ops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                    "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}

    # ---- what it can do ----
    def unsupported(self, coll, dtype, op):
        """Why this backend cannot run coll with dtype and op (None: it can)."""
        if op == "avg" and not dtype.floating and self.name != "nccl":
            return f"{self.name} cannot average {dtype.name} (avg needs a floating type)"
        return None

    missing_mode = "torch.distributed has no such call"

    def modes(self, coll):
        return coll.modes

    def bind(self, coll, send, recv, ctx, async_op):
        """coll on this backend as a zero-argument call (a Work when async_op)."""
        return coll.bind(self.dist, send, recv, ctx, async_op)

    def allgather_object(self, obj):
        """A call gathering one picklable object from every rank (the slow, general path)."""
        out = [None] * self.session.size

        def call():
            self.dist.all_gather_object(out, obj)
            return out
        return call

    def default_blocking(self):
        # On a GPU stream the iterations run in order, so launching them all and syncing
        # once is what nccl-tests does. gloo runs async work on several threads at once,
        # which would measure overlapping collectives: wait for each by default.
        return not self.cuda

    # ---- buffers ----
    def alloc(self, nbytes, rank):
        limit = faults.get("oom", rank)
        if limit is not None:
            from ..sizes import parse_size
            if nbytes >= parse_size(limit):
                raise MemoryError(f"test fault switch MPIBENCH_FAULT=oom: refusing {nbytes} bytes")
        return self.torch.zeros(nbytes, dtype=self.torch.uint8, device=self.device)

    def typed(self, buf, dtype):
        usable = buf.numel() - buf.numel() % dtype.size
        return buf[:usable].view(torch_dtype(dtype))

    def is_oom(self, exc):
        return isinstance(exc, (MemoryError, self.torch.OutOfMemoryError)) or "out of memory" in str(exc)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    # ---- timing ----
    def time_loop(self, calls, blocking, graph_launches=0):
        """Seconds per call for running every call once (in order)."""
        if self.cuda:
            return self._time_cuda(calls, blocking, graph_launches)
        perf = time.perf_counter
        if blocking:
            t0 = perf()
            for call in calls:
                call()
            t1 = perf()
        else:
            t0 = perf()
            works = [call() for call in calls]
            for work in works:
                work.wait()
            t1 = perf()
        return (t1 - t0) / len(calls)

    def _time_cuda(self, calls, blocking, graph_launches):
        torch = self.torch
        stream = torch.cuda.current_stream(self.device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if graph_launches:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for call in calls:
                    call()
            torch.cuda.synchronize(self.device)
            start.record(stream)
            for _ in range(graph_launches):
                graph.replay()
            end.record(stream)
            end.synchronize()
            del graph
            return start.elapsed_time(end) / 1e3 / (len(calls) * graph_launches)
        torch.cuda.synchronize(self.device)
        if blocking:
            sync = stream.synchronize
            start.record(stream)
            for call in calls:
                call()
                sync()
            end.record(stream)
        else:
            start.record(stream)
            for call in calls:
                call()
            end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / len(calls)

    def time_each(self, call, count, barrier):
        """Per-call seconds for count calls, each started together after a barrier."""
        perf = time.perf_counter
        sync = self.torch.cuda.current_stream(self.device).synchronize if self.cuda else None
        out = [0.0] * count
        for k in range(count):
            barrier()
            t0 = perf()
            call()
            if sync is not None:
                sync()
            out[k] = perf() - t0
        return out

"""`train`'s steps, timed per rank (docs/commands/train.md). The timed region holds the
step's calls and a device sync: batches, gradient lists and closures are made before,
losses read after. A rank that cannot hold the model says so before any collective runs,
so that no rank is left waiting in one.
"""
import contextlib
import time
from typing import Any, Callable, ContextManager, List, Optional, Tuple

from ..launch.session import Session
from . import model, switches
from .backends.torchdist import error_line, is_oom
from .sizes import format_bytes

Step = Callable[[Any, Any], Any]    # one training step of (inputs, targets): its loss

PARALLEL = ("ddp", "fsdp", "none")
# A few bf16 rounding steps of the loss: far below what diverged replicas show.
BF16_LOSS_RTOL = 1e-2
BATCHES = 2         # distinct batches per rank, used in turn


def fsdp_unsupported(backend: str, torch: Any) -> Optional[str]:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return f"torch {torch.__version__} has no FSDP2 (torch.distributed.fsdp.fully_shard)"
    if backend not in ("nccl", "gloo"):
        return f"FSDP2 does not run on the {backend} backend"
    return None


class Memory:
    """Peak memory of this rank from now on: CUDA's max_memory_allocated on a GPU; on a
    CPU the growth of the process's peak resident set (VmHWM, reset through clear_refs
    where the kernel allows, else measured from the resident set at start)."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch, self.device = torch, device
        self.cuda = device.type == "cuda"
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
            self.kind = "cuda_max_memory_allocated"
            return
        with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
            f.write("5")          # resets VmHWM to the current resident set
        self.kind = "peak_rss_growth"
        self.start = _status("VmRSS")

    def peak(self) -> Optional[int]:
        if self.cuda:
            return int(self.torch.cuda.max_memory_allocated(self.device))
        hwm = _status("VmHWM")
        return None if hwm is None or self.start is None else max(0, hwm - self.start)


def _status(field: str) -> Optional[int]:
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


class Trainer:
    """One rank's model, optimizer and step functions for a --parallel mode."""

    def __init__(self, session: Session, preset: str, shape: model.Shape, *, batch: int,
                 parallel: str, bucket_mb: float, device: Any) -> None:
        import torch
        self.s, self.torch = session, torch
        self.preset, self.shape, self.batch, self.parallel = preset, shape, batch, parallel
        self.bucket_mb, self.device = bucket_mb, device
        self.cuda = device.type == "cuda"
        self.precision = "bf16 autocast" if self.cuda else "fp32"
        # How far the replicas' losses on a shared batch may differ (docs/gpu.md says why)
        self.loss_rtol = BF16_LOSS_RTOL if self.cuda else 0.0
        self._amp: ContextManager[Any] = (torch.autocast("cuda", dtype=torch.bfloat16) if self.cuda
                                          else contextlib.nullcontext())
        self._sync: Callable[[], None] = ((lambda: torch.cuda.synchronize(device)) if self.cuda
                                          else (lambda: None))
        self.memory = Memory(torch, device)
        self.parameters = model.parameters(shape)
        self.data: Any = None     # this rank's batches, once built
        self.ddp: Any = None
        self.ref: Any = None

    # ---- build: local first, so that a rank short of memory is known before any collective ----
    def fit_error(self) -> Optional[str]:
        """Build the model, optimizer and (FSDP) unsharded reference, and run one local
        step; the error text if this rank is out of memory."""
        state = 4 * self.parameters * 4      # weights, gradients, AdamW's two moments (fp32)
        need = state * (2 if self.parallel == "fsdp" else 1)
        try:
            switches.refuse(self.s.rank, need)
            self.data = model.batches(self.shape, self.batch, 1000 + self.s.rank, BATCHES, self.device)
            self.net, self.opt = self._replica()
            if self.parallel == "fsdp":     # the unsynced reference: an unsharded copy
                self.ref, self.ref_opt = self._replica()
            self._sync()
        except Exception as exc:
            if not is_oom(self.torch, exc):
                raise
            self.net = self.opt = self.ref = self.data = None
            return (f"the model does not fit: {model.describe(self.preset, self.shape)} needs "
                    f"{format_bytes(need)} for weights, gradients and AdamW state"
                    f"{' (and its unsharded copy)' if self.parallel == 'fsdp' else ''} "
                    f"before activations; {error_line(exc)}")
        return None

    def _adamw(self, net: Any) -> Any:
        return self.torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.1, foreach=True)

    def _replica(self) -> Tuple[Any, Any]:
        """The model and its AdamW after a forward, backward and optimizer step with zeroed
        gradients: every buffer the timed steps need is allocated, and every rank's weights
        and state stay the same."""
        net = model.build(self.shape, self.device)
        opt = self._adamw(net)
        x, y = self.data[0]
        with self._amp:
            loss = net(x, y)
        loss.backward()
        self.torch._foreach_zero_([p.grad for p in net.parameters()])
        opt.step()
        opt.zero_grad(set_to_none=False)
        return net, opt

    def wrap(self) -> None:
        """The data-parallel wrapper (collectives from here on) and the steps: synced (None
        for --parallel none) and unsynced."""
        amp = self._amp
        self.synced: Optional[Step] = None
        self.unsynced: Step = _step(self.net, self.opt, amp)
        if self.parallel == "fsdp":
            from torch.distributed.fsdp import fully_shard
            for block in self.net.blocks:
                fully_shard(block)
            fully_shard(self.net)
            self.opt = self._adamw(self.net)      # over the sharded parameters
            self.synced, self.unsynced = _step(self.net, self.opt, amp), _step(self.ref, self.ref_opt, amp)
        elif self.parallel == "ddp":
            from torch.nn.parallel import DistributedDataParallel
            ids = [self.device.index] if self.cuda else None
            ddp = self.ddp = DistributedDataParallel(self.net, device_ids=ids, bucket_cap_mb=self.bucket_mb)
            opt, zero = self.opt, self.torch._foreach_zero_
            grads = [p.grad for p in self.net.parameters()]   # kept: zero_grad(set_to_none=False)

            def unsynced(x: Any, y: Any) -> Any:
                opt.zero_grad(set_to_none=False)
                with ddp.no_sync():
                    with amp:
                        loss = ddp(x, y)
                    loss.backward()
                zero(grads)     # local gradients must not move the weights: the replicas stay equal
                opt.step()
                return loss
            self.synced, self.unsynced = _step(ddp, opt, amp), unsynced

    # ---- timing ----
    def timed(self, fn: Step, k: int, barrier: Callable[[], Any]) -> Tuple[float, Any]:
        """(seconds, loss) of one step on this rank, started after barrier."""
        x, y = self.data[k % BATCHES]
        sync, perf = self._sync, time.perf_counter
        barrier()
        t0 = perf()
        loss = fn(x, y)
        sync()
        return perf() - t0, loss

    # ---- after the timed steps ----
    def shared_loss(self) -> float:
        """The model's loss on a batch every rank shares: equal losses, equal replicas."""
        x, y = model.batches(self.shape, self.batch, 7, 1, self.device)[0]
        net = self.ddp.module if self.ddp is not None else self.net
        with self.torch.no_grad(), self._amp:
            return float(net(x, y))

    def buckets(self) -> List[int]:
        """Bytes of each gradient bucket DDP all-reduces per step (the reducer rebuilds them
        after the first step, in gradient order)."""
        if self.ddp is None:
            return []
        return [b.buffer().numel() * b.buffer().element_size()
                for b in self.ddp.reducer._get_zeros_like_grad_buckets()]

    def fsdp_units(self) -> List[Tuple[int, int]]:
        """(bytes, gathers per step) of each FSDP unit: blocks gather twice (they reshard
        after forward), the root once."""
        if self.parallel != "fsdp":
            return []
        n = self.s.size
        inside = {id(p) for b in self.net.blocks for p in b.parameters()}
        root = [p for p in self.net.parameters() if id(p) not in inside]
        units = [(sum(_padded(p, n) for p in params), gathers) for params, gathers
                 in [(list(b.parameters()), 2) for b in self.net.blocks] + [(root, 1)]]
        return [u for u in units if u[0]]


def _padded(p: Any, n: int) -> int:
    """Bytes of p sharded on dim 0 over n ranks, padded to equal shards."""
    shape = p.shape
    rows = -(-shape[0] // n) * n
    rest = p.numel() // shape[0] if shape[0] else 0
    return int(rows * rest * p.element_size())


def _step(net: Any, opt: Any, amp: ContextManager[Any]) -> Step:
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad(set_to_none=False)
        with amp:
            loss = net(x, y)
        loss.backward()
        opt.step()
        return loss
    return step

"""What every collective module provides, and the check values they share.

Check values are small integers chosen so that every output element has a closed
form and is exact in any reduction order (partial sums stay within the dtype's exact
integer range): a rank's expected output is computed from its own indices alone, in
bounded chunks, never by simulating the other ranks.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..backends.timing import Call as Call   # re-exported: the collectives bind these
from ..dtypes import DType

CHUNK = 1 << 20           # elements per check chunk: bounds the check's extra memory
Tensor = Any              # a torch.Tensor (torch is imported where it is first needed)
Values = Callable[[int, int], Tensor]     # values(start, stop) of a view, for fill_chunks


@dataclass(frozen=True)
class Counts:
    """Element counts as nccl-tests defines them (see its *GetCollByteCount)."""
    send: int                 # elements in the send buffer
    recv: int                 # elements in the receive buffer
    param: int                # the count passed to the collective (printed as 'count')
    send_inplace_offset: int  # in place, send = recv buffer + offset * rank
    recv_inplace_offset: int  # in place, recv = recv buffer + offset * rank


def algbw(nbytes: int, seconds: float) -> Optional[float]:
    """nccl-tests' algbw, GB/s (1e9 bytes); None without a time."""
    return nbytes / seconds / 1e9 if seconds > 0 else None


def busbw(alg: Optional[float], factor: float) -> Optional[float]:
    """nccl-tests' busbw; None where not defined (factor 0: a single rank)."""
    return alg * factor if alg is not None and factor > 0 else None


def align_down(count: int, elsize: int) -> int:
    """nccl-tests keeps per-rank chunks 16-byte aligned."""
    mask = max(16 // elsize, 1) - 1
    return count & ~mask


class Collective:
    name = ""
    reduces = False         # takes a reduction op
    rooted = False          # takes a root
    ring = False            # each rank sends to one neighbour and receives from the other
    modes: Tuple[str, ...] = ("out", "in")   # what torch.distributed can express: out-of-place, in-place
    mpi_modes: Optional[Tuple[str, ...]] = None   # what MPI can express, when it differs from modes
    min_ranks = 1
    chunked = False         # nccl-tests' S is count x n, busbw (n-1)/n: one chunk per rank
    one_sender = False      # only the root's send buffer is an input
    to_each = False         # the sender's chunk j is for rank j
    irregular = False       # ranks send their peers different counts (size is not count-based)
    program = ""            # nccl-tests' program, without _perf (default: the name)
    aliases: Tuple[str, ...] = ()    # other names log files carry (nccl_alltoall.log, bcast.out)
    in_place_checked = True  # nccl-tests checks the in-place result (else #wrong N/A in place)
    any_redop = False       # nccl-tests prints a redop cell though it reduces nothing
    algbw_scaled_before_2020 = False  # algbw printed x (n-1)/n before June 2020 (busbw = algbw)
    # how NCCL runs it, for predict's model (docs/commands/predict.md)
    nccl_ring = False       # a ring whose slowest link carries the bus factor's share of S (else 1 S)
    ring_passes = 1         # times around the ring: (n-1) steps each
    nccl_tree = False       # NCCL also runs it as a tree
    exchange = False        # a group of sends and receives, one pair per peer ...
    one_peer = False        # ... to one peer only (S to it; else S/n to each)
    # {(backend, mode): text}: where torch's call differs from nccl-tests' for this
    # collective; said in the header and the JSON, for those who compare the rows
    torch_notes: Dict[Tuple[str, str], str] = {}

    @property
    def symmetric(self) -> bool:
        """Whether per-rank times can name a slow rank or host: not when a rank's time
        depends on its place (the root, or the neighbour it receives from)."""
        return not (self.rooted or self.ring)

    def counts(self, count: int, elsize: int, n: int) -> Counts:
        return Counts(count, count, count, 0, 0)

    def bw_bytes(self, counts: Counts, elsize: int, n: int) -> int:
        """Bytes S in algbw = S / t (nccl-tests' *GetBw)."""
        return counts.param * elsize * (n if self.chunked else 1)

    def busbw_factor(self, n: int) -> float:
        return (n - 1) / n if self.chunked else 1.0

    def empty(self, counts: Counts) -> bool:
        """Whether a row of these counts moves nothing (it is skipped)."""
        return counts.param == 0

    def per_rank_bytes(self, counts: Counts, elsize: int, n: int) -> Optional[List[Tuple[int, int]]]:
        """(bytes sent, bytes received) of every rank where ranks differ in them, else None."""
        return None

    # ---- correctness check: fill inputs, then count wrong outputs ----
    def fill(self, send: Tensor, recv: Tensor, ctx: "Ctx") -> None:
        """This rank's inputs into send, poison into recv first (a reduction's in-place recv
        lies inside send, which overwrites it)."""
        if not (self.reduces and ctx.in_place):
            recv.fill_(poison_value(ctx.dtype))
        if self.one_sender and ctx.rank != ctx.root:
            return
        fill_chunks(send, per_destination(ctx, ctx.rank) if self.to_each
                    else rank_values(ctx, ctx.rank, reduce_inputs if self.reduces else data_values))

    def expected(self, ctx: "Ctx", start: int, stop: int) -> Optional[Tensor]:
        """Expected values of recv[start:stop] on this rank (int64 or float64), or None: unchecked."""
        raise NotImplementedError

    def bind(self, dist: Any, send: Tensor, recv: Tensor, ctx: "Ctx", async_op: bool) -> Call:
        """One call on torch.distributed; it returns a Work (async) or None."""
        raise NotImplementedError

    def bind_mpi(self, comm: Any, send: Tensor, recv: Tensor, ctx: "Ctx", nonblocking: bool) -> Call:
        """The same through mpi4py on numpy views of the buffers: an MPI.Request or None."""
        raise NotImplementedError


@dataclass
class Ctx:
    """Everything a check or a call needs besides the buffers."""
    rank: int
    n: int
    root: int
    op: str                   # sum prod min max avg, or "none"
    dtype: DType
    count: int = 0            # Counts.param of this row
    in_place: bool = False
    seed: int = 0
    backend_op: Any = None    # the backend's op: dist.ReduceOp or MPI.Op
    device: Any = None        # a torch.device


def mpi_send(ctx: Ctx, buf: Tensor) -> Any:
    """buf as MPI takes it, or MPI_IN_PLACE in place."""
    from mpi4py import MPI
    return MPI.IN_PLACE if ctx.in_place else buf.numpy()


def index(ctx: Ctx, start: int, stop: int) -> Tensor:
    import torch
    return torch.arange(start, stop, dtype=torch.int64, device=ctx.device)


# ---------- values for collectives that move data without reducing ----------

def data_values(ctx: Ctx, src: Any, i: Tensor, dst: Any = 0) -> Tensor:
    """Position-sensitive values a rank src sends (dst: for all_to_all, whom to); src and dst
    may be tensors of ranks, one per element of i."""
    return (src * 7 + dst * 13 + i + ctx.seed) % ctx.dtype.period


def rank_values(ctx: Ctx, src: int, values: Callable[[Ctx, int, Tensor], Tensor] = data_values) -> Values:
    return lambda a, b: values(ctx, src, index(ctx, a, b))


def per_destination(ctx: Ctx, src: int) -> Values:
    """Chunk j of count elements holds what rank src sends to rank j (all_to_all, scatter)."""
    def values(a: int, b: int) -> Tensor:
        k = index(ctx, a, b)
        return data_values(ctx, src, k % ctx.count, dst=k // ctx.count)
    return values


def poison_value(dtype: DType) -> int:
    """What recv holds before the call: never a valid output. Data values lie in [0,
    period); signed reductions give -2 at the lowest (sums of -1, 0, 1 give -1, 0 or 1),
    so the far end of the exact range is clear of every result."""
    return -dtype.exact if dtype.signed else dtype.exact


# ---------- values for reductions, and their closed-form results ----------

def reduce_inputs(ctx: Ctx, r: int, i: Tensor) -> Tensor:
    import torch
    s = i + ctx.seed
    if ctx.op in ("sum", "avg"):
        v = (r + s) % 3
        return v - 1 if ctx.dtype.signed else v
    if ctx.op == "prod":
        v = torch.where((s % ctx.n) == r, 2, 1)
        if ctx.dtype.signed:
            v = torch.where((r + s) % 5 == 0, -v, v)
        return v
    if ctx.op in ("min", "max"):
        return (r + s) % ctx.n + s % 3
    raise ValueError(ctx.op)


def reduce_result(ctx: Ctx, i: Tensor) -> Tensor:
    """The reduction over ranks 0..n-1 of reduce_inputs at indices i, in closed form."""
    import torch
    n, s = ctx.n, i + ctx.seed
    if ctx.op in ("sum", "avg"):
        a = s % 3
        q, rem = divmod(n, 3)
        total = 3 * q + (a if rem >= 1 else 0 * a) + ((a + 1) % 3 if rem >= 2 else 0 * a)
        if ctx.dtype.signed:
            total = total - n
        return total.double() / n if ctx.op == "avg" else total
    if ctx.op == "prod":
        if not ctx.dtype.signed:
            return torch.full_like(i, 2)
        q, rem = divmod(n, 5)
        negatives = q + (((-s) % 5) < rem).long()
        return torch.where(negatives % 2 == 1, -2, 2)
    if ctx.op == "min":
        return s % 3
    if ctx.op == "max":
        return n - 1 + s % 3
    raise ValueError(ctx.op)


def exact_reason(ctx: Ctx) -> Optional[str]:
    """Why values cannot be exact for this op, dtype and rank count (None: they are)."""
    d, n = ctx.dtype, ctx.n
    need = {"sum": n if d.signed else 2 * n, "avg": n if d.signed else 2 * n,
            "prod": 2, "min": n + 1, "max": n + 1, "none": 0}[ctx.op]
    if need > d.exact:
        return f"{ctx.op} over {n} ranks leaves the exact integer range of {d.name}"
    if ctx.op == "avg" and not d.floating:
        return f"avg of {d.name} is not exact"
    if ctx.op == "avg" and avg_tolerance(ctx) >= 0.5 / n:
        return (f"avg over {n} ranks allows {d.name} an error of {avg_tolerance(ctx):.3g}, "
                f"not less than half the step between results (1/{n})")
    return None


def avg_tolerance(ctx: Ctx) -> float:
    """avg is a sum divided (or each input multiplied) by n, rounded in any order: (n + 2)
    rounding steps of the dtype's epsilon (2 / exact: exact is 2 to the mantissa bits + 1)."""
    return (ctx.n + 2) * 2.0 / ctx.dtype.exact


def count_wrong(coll: Collective, recv: Tensor, ctx: Ctx) -> Optional[int]:
    """Wrong elements in recv (None: this rank's output is not defined). The tolerance test
    fails for NaN."""
    wrong = 0
    total = recv.numel()
    for start in range(0, total, CHUNK):
        stop = min(start + CHUNK, total)
        if (exp := coll.expected(ctx, start, stop)) is None:
            return None
        got = recv[start:stop]
        if ctx.op == "avg":
            wrong += int((~((got.double() - exp).abs() <= avg_tolerance(ctx))).sum())
        else:
            wrong += int((got != exp.to(got.dtype)).sum())
    return wrong


def fill_chunks(view: Tensor, values_fn: Values) -> None:
    """view[k] = values_fn(k) for every k, CHUNK elements at a time."""
    total = view.numel()
    for start in range(0, total, CHUNK):
        stop = min(start + CHUNK, total)
        view[start:stop].copy_(values_fn(start, stop))

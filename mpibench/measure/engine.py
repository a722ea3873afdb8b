"""The shared engine: buffers, the sweep over sizes, timing, checking, gathering, rows.

Per row, each rank times its own loop; rank 0 gathers every rank's time over the side
channel (MPI), not through the backend being measured.
"""
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple
from statistics import mean

from ..errors import Exit
from ..launch.session import Session
from ..launch.watchdog import TIMED_LOOP
from . import iterstats, launchcost, looptrace, switches
from .backends.torchdist import TorchBackend, error_line
from .collectives.base import (algbw, busbw, Call, Collective, count_wrong, Counts, Ctx,
                               exact_reason, fill_chunks, rank_values, Tensor)
from .dtypes import DType
from .modes import MODE_KEYS, MODE_TEXT, MODES
from .row import Figures, Row
from .sizes import format_size

AVERAGES = {0: "rank 0", 1: "mean", 2: "min", 3: "max"}
# nccl-tests' -a: the time of rank 0, or the mean, min or max across ranks
PICK: Dict[int, Callable[[List[float]], float]] = {0: lambda times: times[0], 1: mean, 2: min, 3: max}
# One rank's figures of one row and mode: (seconds per call, wrong elements or None: not
# checked, calls in flight, -I 1: each iteration's seconds)
Measured = Tuple[float, Optional[int], int, Optional[List[float]]]


class Report(Protocol):
    """Where rank 0's figures go (the run command's: diagnose.stragglers.Sink)."""
    def set(self, **items: Any) -> None: ...       # document-level facts (skipped_sizes)
    def table_header(self, collective: str) -> None: ...   # nccl-tests' start line, column header
    def add_row(self, row: Row) -> None: ...       # one row, as soon as it is measured
    def add_probe(self, times: List[List[float]], margin: float, *, coll: Collective, dt: DType, op: str,
                  size: int, c: Counts, mode: str) -> None: ...
    # add_probe's times[r][k]: seconds of rank r in iteration k of the per-host probe


@dataclass(frozen=True)
class Plan:
    """What a sweep measures, built once from the options (a plan for less room: replace())."""
    collectives: List[Collective]
    sizes: List[int]
    dtypes: List[DType]
    ops: List[str]
    root: int = 0
    iters: int = 20
    warmup: int = 5
    check: int = 1
    average: int = 1
    blocking: int = 2          # -z: 0 1 2 3 as nccl-tests (backends/timing.py)
    graph: int = 0
    per_iter: int = 0          # -I 1: every iteration timed (iterstats.py), -K skipped in its summary
    per_iter_skip: int = 0
    modes: Tuple[str, ...] = ("out", "in")
    probe_iters: int = 20
    margin: float = 0.2


def calls_per_row(plan: Plan) -> int:
    """Calls one row of one mode runs (warm-up, first call, iterations x -G, check)."""
    return plan.warmup + 1 + plan.iters * max(1, plan.graph) + plan.check


class Buffers:
    """One send and one receive buffer for the largest row, viewed for every smaller one."""

    def __init__(self, backend: TorchBackend, send_bytes: int, recv_bytes: int) -> None:
        send, recv = ((n + 15) // 16 * 16 for n in (send_bytes, recv_bytes))
        self.send = backend.alloc(send) if send else None
        self.recv = backend.alloc(recv)
        self.nbytes = send + recv


def footprint(plan: Plan, n: int, sizes: Sequence[int],
              modes_of: Callable[[Collective], Sequence[str]] = lambda coll: coll.modes
              ) -> Tuple[int, int]:
    """Bytes of send and receive buffer the largest row needs, in the modes_of(coll) modes."""
    send = recv = 0
    for coll in plan.collectives:
        modes = [m for m in plan.modes if m in modes_of(coll)]
        for dt in plan.dtypes:
            for size in sizes:
                c = coll.counts(size // dt.size, dt.size, n)
                if "out" in modes:
                    send = max(send, c.send * dt.size)
                    recv = max(recv, c.recv * dt.size)
                if "in" in modes:
                    recv = max(recv, max(c.send, c.recv) * dt.size)
    return send, recv


GIB = 1 << 30


def nccl_reserve(total: int) -> int:
    """Device bytes the buffers leave free of total for NCCL's buffers (made mid-sweep),
    graphs and the check: as nccl-tests' common.cu, 1 GiB per 16 GiB (at most 4) + 1 GiB."""
    return min(-(-total // (16 * GIB)), 4) * GIB + GIB


def reserve_room(session: Session, backend: TorchBackend,
                 plan: Plan) -> Tuple[Optional[Dict[str, Any]], Plan]:
    """On GPUs, the plan without its largest sizes until the buffers leave NCCL its room on the
    smallest GPU (never the smallest size), and {device_bytes, reserve_bytes, maxbytes,
    lowered_to (None: -e stood)}; None and the plan on CPUs."""
    if (mine := backend.device_total_bytes()) is None:
        return None, plan
    total: int = min(session.comm.allgather(mine))
    sizes = list(plan.sizes)
    while (len(sizes) > 1 and sum(footprint(plan, session.size, sizes, backend.modes))
           > total - nccl_reserve(total)):
        sizes.pop()
    room = {"device_bytes": total, "reserve_bytes": nccl_reserve(total), "maxbytes": plan.sizes[-1],
            "lowered_to": sizes[-1] if len(sizes) < len(plan.sizes) else None}
    return room, replace(plan, sizes=sizes)


def allocate(session: Session, backend: TorchBackend, plan: Plan, sizes: List[int], skipped: List[int],
             out: Callable[[str], None]) -> Buffers:
    """Allocate for the largest of sizes every rank can hold; drop larger sizes together (from
    sizes, into skipped)."""
    while sizes:
        send, recv = footprint(plan, session.size, sizes, backend.modes)
        bufs, exc = backend.attempt(partial(Buffers, backend, send, recv))
        errors = session.comm.allgather(error_line(exc) if exc else None)
        bad = [(r, e) for r, e in enumerate(errors) if e]
        if bufs is not None and not bad:
            return bufs
        bufs = None
        rank, text = bad[0]
        out(f"# out of memory for {format_size(sizes[-1])} on rank {rank} "
            f"(host {session.hosts[rank]}): {text}; skipping {format_size(sizes[-1])} "
            f"and larger on every rank")
        skipped.append(sizes.pop())
    raise Exit("not even the smallest size fits in memory on every rank", 1)


def tensor(session: Session, backend: TorchBackend, dtype: DType, count: int,
           values: Optional[List[int]] = None) -> Tensor:
    """A count-element tensor on the backend's device, allocated on every rank or none
    (for the commands that time one call at a time: check and the classic ones)."""
    nbytes = count * dtype.size
    buf, exc = backend.attempt(lambda: backend.typed(backend.alloc(nbytes), dtype))
    # raises on every rank when one could not allocate
    session.agree(exc and f"cannot allocate {nbytes} bytes: {type(exc).__name__}", 1)
    if values is not None and buf is not None:
        buf.copy_(backend.torch.tensor(values, dtype=buf.dtype))
    return buf


def iteration_views(send_t: Tensor, recv_t: Tensor, c: Counts, mode: str, rank: int,
                    wanted: int) -> List[Tuple[Tensor, Tensor]]:
    """(send, recv) views for successive iterations, moving through the buffers as
    nccl-tests does so that repeated calls do not just hit the cache."""
    if mode == "in":
        foot = max(c.send, c.recv)
        s, r = c.send_inplace_offset * rank, c.recv_inplace_offset * rank
        return [(recv_t[b + s:b + s + c.send], recv_t[b + r:b + r + c.recv])
                for b in range(0, min(max(1, recv_t.numel() // foot), wanted) * foot, foot)]
    steps = max(1, min(send_t.numel() // c.send, recv_t.numel() // c.recv))
    return [(send_t[j * c.send:(j + 1) * c.send], recv_t[j * c.recv:(j + 1) * c.recv])
            for j in range(min(steps, wanted))]


class Engine:
    """The sweep of one plan on one backend; report: rank 0's, None elsewhere; quiet: without
    progress lines."""

    def __init__(self, session: Session, backend: TorchBackend, plan: Plan,
                 report: Optional[Report], quiet: bool = False) -> None:
        self.s, self.b, self.plan, self.report = session, backend, plan, report
        # the sizes the buffers hold, and those dropped for lack of memory, over every run
        self.sizes: List[int] = list(plan.sizes)
        self.skipped: List[int] = []
        self.out: Callable[[str], None] = (lambda text: None) if quiet else session.out
        self.buffer_bytes = 0   # what this rank allocated for the sweep
        self.watch = session.watch
        # {collective: seconds per launch} (GPUs): rows near it are marked
        self.launch_cost: Optional[Dict[str, float]] = None
        switches.install(self, session.rank)     # test switches, when on (launch/faults.py)

    def run(self, probe: bool = True) -> int:
        """The sweep; probe: with the per-host probe (a run's last trial)."""
        self.watch.arm("allocating buffers")
        bufs = allocate(self.s, self.b, self.plan, self.sizes, self.skipped, self.out)
        self.buffer_bytes = bufs.nbytes
        if self.skipped and self.report is not None:
            self.report.set(skipped_sizes=self.skipped)
        total_wrong = 0
        for coll in self.plan.collectives:
            if self.s.size < coll.min_ranks:
                self.out(f"# {coll.name}: skipped, it needs at least {coll.min_ranks} ranks")
                continue
            if not self.modes_run(coll):
                asked = " or ".join(MODE_TEXT[m] for m in self.plan.modes)
                self.out(f"# {coll.name}: skipped, no {asked} call ({self.b.missing_mode})")
                continue
            total_wrong += self.run_collective(coll, bufs, probe)
        return total_wrong

    # ---- one bound call at a time, outside a sweep (check and the classic commands) ----
    def bind_checked(self, coll: Collective, sv: Tensor, rv: Tensor, ctx: Ctx) -> Call:
        """A call whose output is read (the check's, demo's): the corrupt switch wraps it."""
        return self.b.bind(coll, sv, rv, ctx, False)

    def group_call(self, coll: Collective, dt: DType, count: int, n: int,
                   group: Any = None) -> Tuple[Call, Counts, str]:
        """(call, counts, mode): coll of count elements among the n ranks of group (None:
        all), bound as the sweep binds it, in place where it can be, on a buffer every rank
        allocates."""
        c = coll.counts(count, dt.size, n)
        mode = "in" if "in" in self.b.modes(coll) else "out"     # in place needs one buffer
        buf = tensor(self.s, self.b, dt, max(c.send, c.recv) if mode == "in" else c.send + c.recv)
        # In place, each rank's part of the buffer is at its rank in the group that calls.
        me = self.s.rank if group is None else self.b.dist.get_rank(group)
        send, recv = iteration_views(buf[c.recv:], buf, c, mode, me, 1)[0]
        ctx = Ctx(rank=me, n=n, root=-1, op="sum", dtype=dt, count=c.param, in_place=mode == "in",
                  backend_op=self.b.ops["sum"], device=self.b.device)
        call: Callable[..., Any] = self.b.bind(coll, send, recv, ctx,
                                               self.b.launches_async(self.plan.blocking))
        return (call if group is None else partial(call, group=group)), c, mode

    def time_calls(self, call: Call, iters: int, barrier: Optional[Call] = None,
                   first: bool = True) -> Tuple[float, Optional[List[float]]]:
        """(seconds per call, each call's seconds) of iters calls, warmed up and timed as a
        sweep's row; first: warm_up's untimed first call; barrier: the group's, else all's."""
        barrier = barrier or self.s.comm.barrier
        calls = [call] * max(iters, self.plan.warmup, 1)
        self.warm_up(calls, barrier, first=first)
        self.watch.mark(TIMED_LOOP)
        timed = self.b.time_loop(calls[:iters], self.plan.blocking, barrier, per_iter=True)
        self.watch.mark("gathering the times")
        return timed

    def warm_up(self, calls: Sequence[Call], barrier: Call, window: int = 1, first: bool = True) -> None:
        """What precedes every timed loop, as nccl-tests' BenchTime: -w untimed calls, one
        more (first: its "sync" call, so that first-use costs such as connecting land in no
        timed loop nor graph capture), and a barrier."""
        warmup, z = self.plan.warmup, self.plan.blocking
        if warmup:
            self.watch.mark("warm-up")
            self.b.time_loop(calls[:warmup], z, barrier, window)
        if first:
            self.watch.mark("untimed first call")
            self.b.time_loop(calls[:1], z, barrier, window)
        self.watch.mark("barrier before the timed loop")
        barrier()

    def modes_run(self, coll: Collective) -> List[str]:
        return [m for m in self.plan.modes if m in self.b.modes(coll)]

    def run_collective(self, coll: Collective, bufs: Buffers, probe_hosts: bool = True) -> int:
        """coll's rows over every type, op and size; then, with probe_hosts, the per-host probe."""
        plan, s = self.plan, self.s
        ops = plan.ops if coll.reduces else ["none"]
        if self.report is not None:
            self.report.table_header(coll.name)
        wrong_total = 0
        probe: Optional[Tuple[DType, str, int, Counts, Tensor, Tensor, Ctx]] = None
        for dt in plan.dtypes:
            send_t = self.b.typed(bufs.send, dt) if bufs.send is not None else None
            recv_t = self.b.typed(bufs.recv, dt)
            for op in ops:
                if reason := self.b.unsupported(coll, dt, op):
                    self.out(f"# {coll.name} {dt.name} {op}: skipped, {reason}")
                    continue
                ctx = Ctx(rank=s.rank, n=s.size, root=plan.root if coll.rooted else -1, op=op,
                          dtype=dt, backend_op=self.b.ops.get(op), device=self.b.device)
                if inexact := exact_reason(ctx) if plan.check else None:
                    self.out(f"# {coll.name} {dt.name} {op}: not checked, {inexact}")
                for size in self.sizes:
                    c = coll.counts(size // dt.size, dt.size, s.size)
                    if coll.empty(c):
                        self.out(f"# {format_size(size)} {dt.name}: skipped, less than one "
                                 f"aligned element per rank for {s.size} ranks")
                        continue
                    wrong_total += self._one_size(coll, dt, op, size, c, send_t, recv_t, ctx,
                                                  plan.check if not inexact else 0)
                    probe = (dt, op, size, c, send_t, recv_t, ctx)
        if probe is not None and plan.probe_iters > 0 and probe_hosts:
            self._probe(coll, *probe)
        return int(s.comm.bcast(wrong_total, root=0))

    def _one_size(self, coll: Collective, dt: DType, op: str, size: int, c: Counts, send_t: Tensor,
                  recv_t: Tensor, ctx: Ctx, check_rounds: int) -> int:
        """One row: each mode measured, every rank's times gathered; rank 0 records it. Its
        wrong elements (0 off rank 0)."""
        ctx.count = c.param
        local: Dict[str, Measured] = {}
        name = f"{coll.name} {format_size(size)} {dt.name} {op}"
        for mode in self.modes_run(coll):
            ctx.in_place = mode == "in"
            self.watch.arm(f"{name} {MODE_TEXT[mode]}")
            local[mode] = self.measure(coll, send_t, recv_t, c, mode, ctx, check_rounds)
        self.watch.arm(name, "gathering the row's times")
        gathered = self.s.comm.gather(local, root=0)
        if self.report is None:
            return 0
        assert gathered is not None        # rank 0, which gathered
        row = self._row(coll, dt, op, size, c, gathered)
        wrong = sum(m.get("nwrong") or 0 for k in MODES if (m := row.get(k)))
        self.report.add_row(row)
        return wrong

    # ---- one row, one mode: warm up, time, check ----
    def measure(self, coll: Collective, send_t: Tensor, recv_t: Tensor, c: Counts, mode: str,
                ctx: Ctx, check_rounds: int) -> Measured:
        plan, s, z = self.plan, self.s, self.plan.blocking
        views = iteration_views(send_t, recv_t, c, mode, s.rank, max(plan.iters, plan.warmup))
        bound = [self.b.bind(coll, sv, rv, ctx, self.b.launches_async(z)) for sv, rv in views]
        # -z 0 on CPUs: one call in flight per buffer slot at most (docs/commands/run.md, -z).
        window = len(bound)
        calls = [bound[i % window] for i in range(max(plan.iters, plan.warmup))]
        # Data, not zeros (zeros can run faster), as nccl-tests' initData (docs/gpu.md).
        values = rank_values(ctx, ctx.rank)
        for sv, rv in views:
            fill_chunks(rv, values)
            fill_chunks(sv, values)    # in place, inside rv
        self.b.sync()
        barrier = s.comm.barrier
        self.warm_up(calls, barrier, window)
        trace = looptrace.Trace(barrier) if looptrace.ON else None
        if trace is not None:
            calls, barrier = trace.calls(calls, views), trace.barrier
        self.watch.mark(TIMED_LOOP)      # after the trace's setup, which syncs every view
        seconds, each = self.b.time_loop(calls[:plan.iters], z, barrier, window, plan.graph,
                                         per_iter=bool(plan.per_iter))
        self.watch.mark("check")
        if trace is not None:
            trace.report(s.rank, f"{coll.name} {c.param} {ctx.dtype.name} {ctx.op} "
                                 f"{MODE_KEYS[mode]} z{z} window {window}")
        wrong = self.check(coll, views[0], ctx, check_rounds) if check_rounds else None
        return seconds, wrong, min(window, plan.iters) if self.b.launches_async(z) else 1, each

    def check(self, coll: Collective, view: Tuple[Tensor, Tensor], ctx: Ctx, rounds: int) -> Optional[int]:
        sv, rv = view
        call = self.bind_checked(coll, sv, rv, ctx)
        if self.plan.graph:
            # -G: the check's call captured and replayed, as nccl-tests' data check, so
            # that what is counted is what a replay wrote (graph: kept while replayed).
            graph, call = self.b.captured([call])
        wrong: Optional[int] = 0
        for k in range(rounds):
            ctx.seed = k + 1
            coll.fill(sv, rv, ctx)
            self.b.sync()
            call()
            self.b.sync()
            w = count_wrong(coll, rv, ctx)
            # Undefined here (not the root): keep calling, the other ranks make every round.
            wrong = None if w is None or wrong is None else wrong + w
        ctx.seed = 0
        return wrong

    # ---- rank 0: one row from every rank's figures ----
    def _row(self, coll: Collective, dt: DType, op: str, size: int, c: Counts,
             gathered: List[Dict[str, Measured]]) -> Row:
        n = self.s.size
        bw_bytes = coll.bw_bytes(c, dt.size, n)
        factor = coll.busbw_factor(n)
        row: Row = {"collective": coll.name, "backend": self.b.name,
               "size": max(c.send, c.recv) * dt.size, "count": c.param, "type": dt.label,
               "dtype": dt.name, "redop": op, "root": self.plan.root if coll.rooted else -1,
               "requested_size": size, "bw_bytes": bw_bytes, "busbw_factor": factor,
               "per_rank_time_us": {}, "per_rank_nwrong": {}}
        if (moved := coll.per_rank_bytes(c, dt.size, n)) is not None:
            row["per_rank_bytes"] = {"send": [a for a, _ in moved], "recv": [b for _, b in moved]}
        for mode, key in MODE_KEYS.items():
            if mode not in self.modes_run(coll):
                row[key] = None
                continue
            times = [g[mode][0] for g in gathered]
            wrongs = [g[mode][1] for g in gathered]
            t = PICK[self.plan.average](times)
            alg = algbw(bw_bytes, t)
            checked = self.plan.check and any(w is not None for w in wrongs)
            figures: Figures = {"time_us": t * 1e6, "algbw_GBps": alg, "busbw_GBps": busbw(alg, factor),
                                "nwrong": sum(w or 0 for w in wrongs) if checked else None,
                                "in_flight": gathered[0][mode][2]}
            if each := [e for g in gathered if (e := g[mode][3]) is not None]:
                figures["per_iter"] = iterstats.report(each, self.plan.per_iter_skip)
            row[key] = figures
            row["per_rank_time_us"][key] = [x * 1e6 for x in times]
            row["per_rank_nwrong"][key] = wrongs
        launchcost.mark_rows([row], launchcost.row_cost(self.launch_cost, coll.name, self.plan.graph))
        return row

    # ---- who is slow: the largest size again, every rank timing every iteration ----
    def _probe(self, coll: Collective, dt: DType, op: str, size: int, c: Counts, send_t: Tensor,
               recv_t: Tensor, ctx: Ctx) -> None:
        s, plan = self.s, self.plan
        mode = "in" if "in" in self.modes_run(coll) else "out"
        ctx.in_place = mode == "in"
        self.watch.arm(f"{coll.name} per-host probe at {format_size(size)}")
        sv, rv = iteration_views(send_t, recv_t, c, mode, s.rank, 1)[0]
        call = self.b.bind(coll, sv, rv, ctx, False)
        times = self.b.time_each(call, plan.probe_iters, s.comm.polite_barrier)
        gathered = s.comm.gather(times, root=0)
        if self.report is not None:
            assert gathered is not None
            self.report.add_probe(gathered, plan.margin, coll=coll, dt=dt, op=op, size=size, c=c, mode=mode)


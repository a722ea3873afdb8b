"""mpibench run: the collective sweep, with nccl-tests' numbers and per-host truth."""
import argparse
import itertools
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from ..diagnose import links, pathlimits, rankfacts, stragglers
from ..diagnose.hostfacts import line_rate
from ..errors import UsageError
from ..launch import torchenv
from ..launch.bootstrap import TORCH_BACKENDS
from ..launch.session import Session
from ..measure.backends import make as make_backend
from ..measure import launchcost
from ..measure.backends.timing import BLOCKING
from ..measure.backends.torchdist import TorchBackend
from ..measure.collectives import NAMES as COLLECTIVES, REGISTRY, traffic
from ..measure.collectives.alltoallv import AllToAllV
from ..measure.collectives.base import Collective
from ..measure.collectives.traffic import Traffic
from ..measure.dtypes import DType, parse_dtypes, parse_list, parse_ops
from ..measure.engine import AVERAGES, Engine, Plan, calls_per_row, reserve_room
from ..measure.modes import MODE_KEYS, MODE_TEXT
from ..measure.sizes import sweep
from ..results import alltoallvtext, inputs, published, runtext
from ..results.numbers import counted
from ..results.rows import UNSTABLE, Collector
from ..results.summary import (closing, comparison as backends_side_by_side, line_rate_lines,
                               path_limit_lines, published_lines)
from ..results.output import RunOutput, open_output
from .common import guard, options

HELP = "sweep collectives over sizes (the default command)"

CPU_MAXBYTES = 16 << 20
GPU_MAXBYTES = 4 << 30


def add_arguments(p: argparse.ArgumentParser) -> None:
    # what is measured: collectives, sizes, iterations, data types, ops, root
    p.add_argument("--collectives", default="all", metavar="LIST",
                   help=f"comma-separated, or all: {', '.join(COLLECTIVES)} (default all)")
    p.add_argument("-b", "--minbytes", type=options.size_arg, default=8, metavar="SIZE",
                   help="smallest size, e.g. 8, 64K, 1M (binary units; default 8)")
    p.add_argument("-e", "--maxbytes", type=options.size_arg, default=None, metavar="SIZE",
                   help="largest size (default 16M on CPUs, 4G on GPUs)")
    p.add_argument("-f", "--stepfactor", type=options.number_arg, default=2.0, metavar="F",
                   help="multiply the size by F each step (default 2)")
    p.add_argument("-i", "--stepbytes", type=options.size_arg, default=None, metavar="SIZE",
                   help="add SIZE each step instead of multiplying")
    p.add_argument("-n", "--iters", type=options.at_least(1), default=20,
                   help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup", "--warmup-iters", type=options.at_least(0), default=5,
                   help="warm-up iterations per size (default 5)")
    p.add_argument("-d", "--dtype", "--datatype", default="float32", metavar="LIST",
                   help="float32, float16, bfloat16, float64, int32, int64, int8, uint8; "
                        "comma-separated or all")
    p.add_argument("-o", "--op", default="sum", metavar="LIST",
                   help="sum, prod, min, max, avg; comma-separated or all (default sum)")
    p.add_argument("-r", "--root", type=options.at_least(0), default=0,
                   help="root of broadcast, reduce, gather and scatter (default 0)")
    p.add_argument("--alltoallv-spread", default=None, metavar="X",
                   help="alltoallv's generated traffic, as nccl-tests: 0.0 the same bytes to every "
                        "peer .. 1.0 more to ranks further away, every rank sending and receiving "
                        f"the same total (default {traffic.SPREAD_ENV}, else 1.0)")
    p.add_argument("--alltoallv-matrix", default=None, metavar="FILE",
                   help="alltoallv's traffic from a square whitespace-separated matrix, bytes "
                        "rank i sends rank j (row i, column j); -b and -e equal and at least the "
                        f"most bytes a rank sends or receives (default {traffic.MATRIX_ENV})")
    p.add_argument("--alltoallv-scale", default=None, metavar="F",
                   help="multiply the matrix's bytes by F (default "
                        f"{traffic.SCALE_ENV}, else 1.0)")
    # how the timed loop runs and what it checks and times
    p.add_argument("-z", "--blocking", type=int, choices=(0, 1, 2, 3), default=None,
                   help="as nccl-tests: 0 launch every iteration, wait once at the end; "
                        "1 wait and barrier (MPI) after each, the barrier timed; 2 wait after "
                        "each; 3 wait and barrier after each, only the calls timed. On CPU "
                        "backends -z 0 keeps at most one call in flight per distinct buffer "
                        "slot (default 0 on GPUs, 2 on gloo and mpi)")
    p.add_argument("-c", "--check", type=options.at_least(0), default=1, metavar="N",
                   help="check rounds after each timed loop, 0 = off (default 1)")
    p.add_argument("-a", "--average", type=int, choices=(0, 1, 2, 3), default=1,
                   help="time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)")
    p.add_argument("--mode", choices=("both", "out", "in"), default="both",
                   help="out-of-place, in-place or both (default both)")
    p.add_argument("-G", "--cuda-graph", "--cudagraph", type=options.at_least(0), default=0, metavar="N",
                   help="GPU only: capture the iterations in a CUDA graph (after the untimed "
                        "first call and a barrier) and replay it N times, -z applied to each "
                        "replay; not with -z 3, as nccl-tests")
    p.add_argument("-I", "--per-iter-timing", type=int, default=0, metavar="{0,1}",
                   help="1: time every iteration, as nccl-tests' -I 1 (CUDA events on GPUs, "
                        "one host clock read per iteration on CPUs), and print each row's "
                        "slowest-rank min, max, p99 and cv of them; the JSON keeps every "
                        "iteration of every rank. Not with -G (default 0)")
    p.add_argument("-K", "--per-iter-skip", type=int, default=0, metavar="N",
                   help="with -I 1: leave the first N iterations out of the per-iteration "
                        "summary (they stay in the JSON), 0 <= N < -n (default 0). Where "
                        "nccl-tests warns and disables a bad -I or -K, mpibench refuses it")
    # slow ranks, hosts and links; the timeout; repeated sweeps
    p.add_argument("--per-rank", action="store_true", help="print every rank's time for every row")
    p.add_argument("--probe-iters", type=options.at_least(0), default=None, metavar="N",
                   help="iterations of the per-host probe at the largest size (default: --iters; 0 = off)")
    options.add_min_share(p, "hosts and ranks slow in most iterations, and links (--link-iters), "
                             "are named when their speed is", "the median's")
    p.add_argument("--link-iters", type=options.at_least(0), default=5, metavar="N",
                   help="after the sweep, with two or more hosts: time N transfers each way "
                        "between every pair of hosts (one rank per host, the largest size up to "
                        "4M on CPUs, 256M on GPUs) and name slow links and hosts; 0 = off (default 5)")
    guard.add_timeout(p, "a row: one collective, size and mode, with warm-up and check", None,
                      "60 s plus the row's bytes at 1 GB/s of bus bandwidth, at most "
                      f"{DEADLINE_CAP:g} s; 300 s for the rendezvous")
    p.add_argument("--trials", "-N", "--run-cycles", type=options.at_least(1), default=1, metavar="K",
                   help="repeat the whole sweep K times; rows show the median and spread (default 1)")
    p.add_argument("--unstable", type=options.positive_float, default=None, metavar="X",
                   help="with --trials: mark a row unstable when its times span more than X "
                        f"times their median (default {UNSTABLE:g})")
    # the files written, and nccl-tests' own flags for them and the rest
    options.add_json(p)
    p.add_argument("--json-format", choices=("mpibench", "nccl-tests"), default=None,
                   help="mpibench (default): everything measured; nccl-tests: nccl-tests' own "
                        "-J schema (2.19.6), for tools written for it (with -I 1 its "
                        "per-iteration fields too)")
    p.add_argument("--csv", metavar="PATH", help="write one line per row and mode (never overwrites)")
    # nccl-tests' command lines paste in: its flags mean here what they mean there
    p.add_argument("-J", "--output-file", dest="nccl_json", metavar="FILE",
                   help="nccl-tests' -J: its JSON (the same as --json FILE --json-format nccl-tests)")
    p.add_argument("-T", dest="timeout", type=options.positive_float, default=argparse.SUPPRESS,
                   metavar="SECONDS", help="nccl-tests' -T: the same as --timeout")
    options.add_nccl_tests_fixed(p)
    p.add_argument("--min-busbw", type=options.positive_float, default=None, metavar="GBPS",
                   help="exit 1 when the average bus bandwidth is below GBPS GB/s (also from "
                        "NCCL_TESTS_MIN_BW, as nccl-tests: below 0.9 of it)")
    options.add_backend(p, several=True)


def check_args(args: argparse.Namespace) -> None:
    """Input errors that need no rank or backend, found by every rank alike at parse time."""
    options.check_nccl_tests_fixed(args)
    if args.nccl_json:
        if args.json:
            raise UsageError("give -J FILE or --json FILE, not both")
        if args.json_format:
            raise UsageError("-J FILE writes nccl-tests' schema: give --json FILE for --json-format")
        args.json, args.json_format = args.nccl_json, "nccl-tests"
    if args.json_format and not args.json:
        raise UsageError(f"--json-format {args.json_format} needs --json FILE")
    if args.unstable is not None and args.trials == 1:
        raise UsageError(f"--unstable {args.unstable:g} needs --trials K (K > 1): it marks a row "
                         f"whose trials spread")
    args.json_format = args.json_format or "mpibench"
    args.unstable = args.unstable or UNSTABLE
    min_bw(args.min_busbw)
    names = lists(args)[0]
    alltoallv_args(args, names)
    sweep(args.minbytes, args.maxbytes or args.minbytes, args.stepfactor, args.stepbytes)
    if args.blocking == 3 and args.cuda_graph:
        raise UsageError("-z 3 cannot go with -G: a CUDA graph replays every call at once, so "
                         "no barrier can be left out of its time (nccl-tests refuses it too)")
    # nccl-tests' checks on -I and -K (src/common.cu): it disables what fails them, we refuse
    if args.per_iter_timing not in (0, 1):
        raise UsageError(f"-I {args.per_iter_timing}: per-iteration timing is 0 (off) or 1 (on)")
    if args.per_iter_timing and args.cuda_graph:
        raise UsageError("-I 1 cannot go with -G: a CUDA graph replays the iterations as one "
                         "launch, so no iteration can be timed alone")
    if args.per_iter_skip and not args.per_iter_timing:
        raise UsageError(f"-K {args.per_iter_skip} needs -I 1: it skips iterations of the "
                         f"per-iteration summary")
    if not 0 <= args.per_iter_skip < args.iters:
        raise UsageError(f"-K {args.per_iter_skip}: the per-iteration skip must be between 0 "
                         f"and {args.iters - 1} (-n {args.iters} iterations)")


def lists(args: argparse.Namespace) -> Tuple[List[str], List[DType], List[str]]:
    """The collectives, data types and ops that --collectives, -d and -o name."""
    return (parse_list(args.collectives, COLLECTIVES, "collective"), parse_dtypes(args.dtype),
            parse_ops(args.op))


def matrix_path(args: argparse.Namespace) -> Optional[str]:
    """The alltoallv matrix file: --alltoallv-matrix, else nccl-tests' variable unless
    --alltoallv-spread asks for the generated pattern; None: generated."""
    if args.alltoallv_matrix is not None:
        given: str = args.alltoallv_matrix
        return given
    return None if args.alltoallv_spread is not None else os.environ.get(traffic.MATRIX_ENV) or None


def alltoallv_args(args: argparse.Namespace, names: Sequence[str]) -> None:
    """The alltoallv options' own errors, found at parse time."""
    if "alltoallv" not in names:
        given = [o for o, v in (("--alltoallv-spread", args.alltoallv_spread),
                                ("--alltoallv-matrix", args.alltoallv_matrix),
                                ("--alltoallv-scale", args.alltoallv_scale)) if v is not None]
        if given:
            raise UsageError(f"{given[0]} shapes alltoallv's traffic: add alltoallv to --collectives")
        return
    if args.alltoallv_spread is not None and args.alltoallv_matrix is not None:
        raise UsageError("give --alltoallv-spread (generated traffic) or --alltoallv-matrix FILE, not both")
    try:
        if args.alltoallv_spread is not None:
            traffic.spread_value(args.alltoallv_spread, "--alltoallv-spread")
        if args.alltoallv_scale is not None:
            traffic.scale_value(args.alltoallv_scale, "--alltoallv-scale")
        if args.alltoallv_scale is not None and matrix_path(args) is None:
            raise traffic.BadMatrix("--alltoallv-scale scales a matrix: give --alltoallv-matrix FILE too")
    except traffic.BadMatrix as exc:
        raise UsageError(str(exc)) from None
    if (path := matrix_path(args)) is not None and (args.maxbytes is None or args.minbytes != args.maxbytes):
        where = "--alltoallv-matrix" if args.alltoallv_matrix else traffic.MATRIX_ENV
        raise UsageError(f"{where} {path}: give -b and -e the same size (e.g. -b 1M -e 1M), at least "
                         f"the most bytes a rank sends or receives: the matrix sets every size, a "
                         f"sweep has nothing to vary (as nccl-tests)")


def alltoallv_traffic(args: argparse.Namespace, session: Session) -> Optional[Traffic]:
    """alltoallv's traffic for this job (its matrix read on rank 0), or None when not run."""
    if "alltoallv" not in lists(args)[0]:
        return None
    path = matrix_path(args)
    where = "--alltoallv-matrix" if args.alltoallv_matrix else traffic.MATRIX_ENV

    def load(file: str) -> Traffic:
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read(64 << 20)
        except OSError as exc:
            raise UsageError(f"cannot read {where} {file}: {exc.strerror or exc}") from None
        try:
            return traffic.from_settings(args.alltoallv_spread, text, file, args.alltoallv_scale,
                                         session.size)
        except traffic.BadMatrix as exc:
            raise UsageError(f"{where} {exc}") from None
    if path is not None:
        found = inputs.on_rank0(session, path, load, where)
    else:
        try:
            found = traffic.from_settings(args.alltoallv_spread, None, None, None, session.size)
        except traffic.BadMatrix as exc:
            raise UsageError(str(exc)) from None
    if not found.generated:
        send, recv = found.max_elements(session.size, 0, 1)
        if args.maxbytes < max(send, recv):
            raise UsageError(f"{where} {path}: -e {args.maxbytes} is below the {max(send, recv)} "
                             f"bytes a rank sends or receives: give -b and -e at least that "
                             f"(as nccl-tests)")
    return found


def host_memory() -> Optional[int]:
    """Bytes of memory this host has available (MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def matrix_fits(session: Session, backends: Sequence[TorchBackend], found: Optional[Traffic]) -> None:
    """UsageError (on every rank) when the matrix's busiest rank needs more buffer than a
    rank's share of its GPU or host memory."""
    if found is None or found.generated:
        return
    send, recv = found.max_elements(session.size, 0, 1)
    need = send + recv
    local = session.hosts.count(session.hostname)
    room = [t for b in backends if b.cuda and (t := b.device_total_bytes()) is not None]
    mine = min(room) if room else (m // local if (m := host_memory()) is not None else None)
    every = session.comm.allgather(mine)
    known = [(m, r) for r, m in enumerate(every) if m is not None]
    if known and need > min(known)[0]:
        have, rank = min(known)
        raise UsageError(f"alltoallv matrix {found.source}: the busiest rank needs {need} bytes of "
                         f"buffers (sending {send}, receiving {recv}), more than the "
                         f"{have} bytes rank {rank} (host {session.hosts[rank]}) has "
                         f"{'on its GPU' if room else 'of its host memory available'}")


def build_plan(args: argparse.Namespace, session: Session, backend: TorchBackend,
               alltoallv: Optional[Traffic] = None) -> Plan:
    """Plan from args; raises UsageError (the same on every rank) for bad input; alltoallv:
    its traffic (None: the registry's, generated at the default spread)."""
    names, dtypes, ops = lists(args)
    maxbytes = args.maxbytes or max(args.minbytes, GPU_MAXBYTES if backend.cuda else CPU_MAXBYTES)
    sizes = sweep(args.minbytes, maxbytes, args.stepfactor, args.stepbytes)
    if args.root >= session.size:
        raise UsageError(f"--root {args.root} is not a rank: the job has "
                         f"{counted(session.size, 'rank')} (0..{session.size - 1})")
    if args.cuda_graph and not backend.cuda:
        raise UsageError(f"-G/--cuda-graph needs CUDA GPUs (NCCL); this run uses {backend.name} on CPU")
    collectives = [AllToAllV(alltoallv) if n == "alltoallv" and alltoallv else REGISTRY[n] for n in names]
    _refuse_graph_sendrecv(args, collectives)
    _refuse_unsupported(args, backend, collectives, dtypes, ops)
    blocking = backend.default_blocking() if args.blocking is None else args.blocking
    modes = _modes(args, backend, collectives)
    return Plan(collectives=collectives, sizes=sizes, dtypes=dtypes, ops=ops, root=args.root,
                iters=args.iters, warmup=args.warmup, check=args.check, average=args.average,
                blocking=blocking, graph=args.cuda_graph, modes=modes,
                per_iter=args.per_iter_timing, per_iter_skip=args.per_iter_skip,
                probe_iters=args.iters if args.probe_iters is None else args.probe_iters,
                margin=options.share_margin(args.min_share))


def _refuse_graph_sendrecv(args: argparse.Namespace, collectives: Sequence[Collective]) -> None:
    """UsageError when -G would capture sendrecv under torch's blocking wait."""
    blocking_wait = torchenv.flag(torchenv.BLOCKING_WAIT, os.environ)
    if args.cuda_graph and blocking_wait and any(c.name == "sendrecv" for c in collectives):
        # WorkNCCL::wait's blocking loop queries an event recorded during the capture
        raise UsageError(f"-G cannot capture sendrecv with {'='.join(blocking_wait)}: torch's "
                         f"blocking wait polls an event recorded in the graph, which CUDA refuses "
                         f"(cudaErrorCapturedEvent); unset it, or leave sendrecv out of -G runs")


def _refuse_unsupported(args: argparse.Namespace, backend: TorchBackend, collectives: Sequence[Collective],
                        dtypes: Sequence[DType], ops: Sequence[str]) -> None:
    """UsageError for the first collective, type and op the backend cannot run (where -d and -o
    name them: 'all' runs what it can)."""
    if args.dtype.strip().lower() != "all" and args.op.strip().lower() != "all":
        for coll, dt in itertools.product(collectives, dtypes):
            for op in (ops if coll.reduces else ["none"]):
                if reason := backend.unsupported(coll, dt, op):
                    raise UsageError(f"{coll.name} -d {dt.name} -o {op}: {reason}")


def _modes(args: argparse.Namespace, backend: TorchBackend, collectives: Sequence[Collective]
           ) -> Tuple[str, ...]:
    """The modes --mode names; UsageError when the backend has a call for none of the collectives."""
    modes = {"both": ("out", "in"), "out": ("out",), "in": ("in",)}[args.mode]
    if not any(m in backend.modes(c) for c in collectives for m in modes):
        raise UsageError(f"--mode {args.mode}: {backend.name} has no {MODE_TEXT[modes[0]]} call "
                         f"for {', '.join(c.name for c in collectives)} ({backend.missing_mode})")
    return modes


def header(session: Session, out: RunOutput, plans: Sequence[Plan], backends: Sequence[TorchBackend],
           records: Sequence[Dict[str, Any]], versions: Sequence[Dict[str, Optional[str]]],
           uncapped: Optional[float] = None) -> None:
    """The run's preamble: settings, every rank's device, versions, network variables;
    uncapped: the row deadline DEADLINE_CAP cut (None: none was cut)."""
    plan = plans[0]
    blocking = {b.name: p.blocking for b, p in zip(backends, plans)}
    modes = {b.name: blocking_mode_text(b, p.blocking) for b, p in zip(backends, plans)}
    runtext.settings(out, versions, plan, average=AVERAGES[plan.average], blocking=blocking, modes=modes,
                     notes=[runtext.blocking_wait_note(backends, os.environ), runtext.memory_note(backends)],
                     clock="CUDA events" if backends[0].cuda else "host clock", timeout=session.watch.timeout,
                     uncapped=uncapped)
    rankfacts.describe(session, out, [b.name for b in backends], records, versions,
                     {"sizes": plan.sizes, "iters": plan.iters, "warmup": plan.warmup,
                      "timeout": session.watch.timeout, "check": plan.check,
                      "blocking": plan.blocking if len(backends) == 1 else blocking, "blocking_mode": modes,
                      "average": AVERAGES[plan.average], "graph": plan.graph,
                      "per_iter_timing": plan.per_iter, "per_iter_skip": plan.per_iter_skip})
    missing = [(mode, b.missing_mode, [c.name for c in plan.collectives if mode not in b.modes(c)])
               for b in backends for mode in MODE_KEYS if mode in plan.modes]
    runtext.call_notes(out, missing, call_notes(plan, backends))
    out.announce_files()


def call_notes(plan: Plan, backends: Sequence[TorchBackend]) -> List[Tuple[str, str, str]]:
    """(backend, collective, text) where torch's call differs from nccl-tests' in the plan's modes."""
    return [(b.name, coll.name, t) for b in backends for coll in plan.collectives
            for t in sorted({coll.torch_notes[b.name, m] for m in plan.modes
                             if (b.name, m) in coll.torch_notes and m in b.modes(coll)})]


def launch_costs(session: Session, backends: Sequence[TorchBackend], plans: Sequence[Plan]
                 ) -> Dict[str, Dict[str, float]]:
    """{backend: {collective: seconds}} of the slowest rank's per-call launch cost of each
    collective the plan runs, GPU backends only (measure/launchcost.py), on rank 0."""
    out: Dict[str, Dict[str, float]] = {}
    for b, plan in zip(backends, plans):
        if b.cuda:
            session.watch.arm(f"per-call launch cost ({b.name})")
            mine = {c.name: launchcost.of_collective(b, c, session.comm.barrier, plan.root)
                    for c in plan.collectives if session.size >= c.min_ranks
                    and any(m in b.modes(c) for m in plan.modes)}
            each = session.comm.gather(mine, root=0)
            if session.rank == 0:
                assert each is not None
                out[b.name] = {k: max(e[k] for e in each) for k in mine}
    return out


def blocking_mode_text(backend: TorchBackend, mode: int) -> str:
    """What -z `mode` does on this backend, for the header and the JSON."""
    text = BLOCKING[mode] + ", plus one untimed call and a barrier before the timed loop"
    if backend.launches_async(mode):
        text += ("; at most one call in flight per distinct buffer slot of the row (up to "
                 "-n; each row's 'in_flight' in the JSON)")
    return text


# The longest row deadline run sets itself: past it a row is called hung unless --timeout
# says more (-G 100 -e 4G's traffic at 1 GB/s would take 4.8 hours, hang detection off).
DEADLINE_CAP = 1800.0


def traffic_deadline(plan: Plan) -> float:
    """60 s plus the largest row's traffic (about 2 x size per call) at 1 GB/s: generous for
    any working network, short enough that a hang is named within minutes."""
    return float(round(60 + max(calls_per_row(plan), plan.probe_iters) * 2 * plan.sizes[-1] / 1e9))


def default_timeout(plan: Plan) -> float:
    """The row deadline without --timeout: traffic_deadline, at most DEADLINE_CAP."""
    return min(DEADLINE_CAP, traffic_deadline(plan))


def min_bw(explicit: Optional[float]) -> Optional[Tuple[float, str]]:
    """(threshold GB/s, where it comes from) or None: --min-busbw X fails below X;
    NCCL_TESTS_MIN_BW=X, as nccl-tests 2.19.6, below 0.9 X."""
    if explicit is not None:
        return explicit, f"--min-busbw {explicit:g}"
    text = os.environ.get("NCCL_TESTS_MIN_BW")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"NCCL_TESTS_MIN_BW={text!r}: not a number (GB/s)") from None
    if not value > 0:
        raise UsageError(f"NCCL_TESTS_MIN_BW={text!r}: must be above 0 (GB/s)")
    return 0.9 * value, f"0.9 x NCCL_TESTS_MIN_BW={text}"


def execute(session: Session, args: argparse.Namespace) -> int:
    backends = [make_backend(session, name) for name in args.backend]
    alltoallv = alltoallv_traffic(args, session)
    matrix_fits(session, backends, alltoallv)
    plans = [build_plan(args, session, backend, alltoallv) for backend in backends]
    out = open_output(session, "run", args)
    guard.arm(session, args.timeout or max(default_timeout(p) for p in plans),
              "start-up (every rank's device and versions)")
    roomed = [reserve_room(session, b, p) for b, p in zip(backends, plans)]
    rooms, plans = [r for r, _ in roomed], [p for _, p in roomed]
    graph_buffers = {b.name: b.graph_allocator() for b, p in zip(backends, plans) if p.graph}
    records, versions = rankfacts.gather(session)
    launch = launch_costs(session, backends, plans)
    rates = session.comm.gather(line_rate(), root=0)
    paths = pathlimits.gather(session)
    if session.rank == 0:
        assert out is not None and records is not None and versions is not None and rates is not None
        _settings_header(session, args, out, plans, backends, records, versions, alltoallv)
        _measure_header(session, args, out, plans, backends, launch,
                        {b.name: r for b, r in zip(backends, rooms)}, graph_buffers, rates, paths)
    wrong, buffer_bytes = _sweeps(session, args, out, backends, plans, launch)
    _link_check(session, args, out, backends, plans)
    session.watch.disarm()
    device_peak = next((b.device_peak_bytes() for b in backends if b.cuda), None)
    memory = session.comm.gather({"peak_rss_bytes": rankfacts.peak_rss_bytes(),
                                  "buffer_bytes": buffer_bytes, "device_peak_bytes": device_peak}, root=0)
    failure = None
    if session.rank == 0:
        assert out is not None
        failure = _summary(session, args, out, backends, wrong, memory)
    return guard.verdict(session, failure)


def _settings_header(session: Session, args: argparse.Namespace, out: RunOutput, plans: Sequence[Plan],
                     backends: Sequence[TorchBackend], records: Sequence[Dict[str, Any]],
                     versions: Sequence[Dict[str, Optional[str]]], alltoallv: Optional[Traffic]) -> None:
    """Rank 0: the run's preamble (header) and alltoallv's traffic."""
    traffic = max(traffic_deadline(p) for p in plans)
    header(session, out, plans, backends, records, versions,
           uncapped=traffic if args.timeout is None and traffic > DEADLINE_CAP else None)
    if alltoallv is not None:
        out.set(alltoallv=alltoallvtext.settings(alltoallv, session.size))
        out.say(f"# alltoallv traffic: {alltoallv.describe(session.size)}")


def _measure_header(session: Session, args: argparse.Namespace, out: RunOutput, plans: Sequence[Plan],
                    backends: Sequence[TorchBackend], launch: Dict[str, Dict[str, float]],
                    rooms: Dict[str, Optional[Dict[str, Any]]], graph_buffers: Dict[str, Dict[str, Any]],
                    rates: Sequence[Optional[float]], paths: Dict[str, Optional[Dict[str, Any]]]) -> None:
    """Rank 0: the launch costs, the GPU room, -G's buffers, the line rates, the path limits and
    the trials."""
    runtext.launch_header(out, launch, plans[0].graph)
    runtext.room_header(out, rooms)
    runtext.graph_buffers_header(out, graph_buffers)
    out.set(line_rate_gbps={session.hosts[r]: rate for r, rate in enumerate(rates)})
    runtext.path_header(out, pathlimits.section(paths, len(paths) > 1),
                        published.section(cast(Dict[str, Dict[str, Any]], paths),   # gather drops None
                                          [c.name for c in plans[0].collectives]))
    if args.trials > 1:
        out.trials = Collector(args.unstable)
        out.set(trials=args.trials)


def _sweeps(session: Session, args: argparse.Namespace, out: Optional[RunOutput],
            backends: Sequence[TorchBackend], plans: Sequence[Plan], launch: Dict[str, Dict[str, float]]
            ) -> Tuple[int, int]:
    """Every backend's sweep, each --trials times: (wrong elements, the largest buffer bytes)."""
    wrong, buffer_bytes = 0, 0
    for backend, plan in zip(backends, plans):
        if len(backends) > 1:
            session.out(runtext.banner(backend.name))
        sink = stragglers.Sink(out, session.hosts) if out is not None else None
        engine = Engine(session, backend, plan, sink)
        engine.launch_cost = launch.get(backend.name)
        wrong += _trials(session, args, engine)
        buffer_bytes = max(buffer_bytes, engine.buffer_bytes)
    return wrong, buffer_bytes


def _trials(session: Session, args: argparse.Namespace, engine: Engine) -> int:
    """One backend's sweep, --trials times, the per-host probe in the last only: wrong elements."""
    wrong = 0
    for k in range(args.trials):        # the per-host probe in the last trial only
        if args.trials > 1:
            session.out(runtext.banner(trial=k + 1, trials=args.trials))
        wrong += engine.run(probe=k == args.trials - 1)
    return wrong


def _link_check(session: Session, args: argparse.Namespace, out: Optional[RunOutput],
                backends: Sequence[TorchBackend], plans: Sequence[Plan]) -> None:
    """The link check between hosts, through the first torch.distributed backend (none without one)."""
    link = next((b for b in backends if b.name in TORCH_BACKENDS), None)
    if link is not None:      # the link check sends through torch.distributed
        session.watch.arm("link check between hosts")
        links.link_check(session, link, out, plans[0].sizes[-1], args.link_iters, min(plans[0].warmup, 2),
                         args.min_share)


def _summary(session: Session, args: argparse.Namespace, out: RunOutput, backends: Sequence[TorchBackend],
             wrong: int, memory: Optional[List[Dict[str, Any]]]) -> Optional[str]:
    """Rank 0: the trials, per-rank and memory tables, the comparison and nccl-tests' closing
    lines; the document finished; why the run failed or None."""
    if args.trials > 1:
        runtext.trials_summary(out, args.trials, args.unstable)
    if args.per_rank:
        runtext.per_rank_table(session.hosts, out)
    runtext.memory_summary(session.hosts, out, memory or [])
    names = [b.name for b in backends]
    lines = _comparison(out, backends, names)
    fields, closing_lines = closing(out.doc["results"], names, len(session.hosts), wrong,
                                    min_bw(args.min_busbw))
    out.say(*lines, *line_rate_lines(out.doc), *path_limit_lines(out.doc), *published_lines(out.doc),
            *closing_lines)     # nccl-tests' closing last
    runtext.launch_bound(out)
    out.set(**fields)
    out.finish()
    return _failure(fields, wrong)


def _comparison(out: RunOutput, backends: Sequence[TorchBackend], names: List[str]) -> List[str]:
    """Two backends: their rows side by side, the second's busbw over the first's (lines; the
    document's comparison); one: no lines."""
    lines: List[str] = []
    if len(backends) > 1:     # both backends' rows side by side, the second's busbw over the first's
        buffers = runtext.buffer_memory(backends)
        first, second = names
        rows, lines = backends_side_by_side(out.doc["results"], first, second, memory=buffers)
        out.set(comparison={"backends": names, "memory": buffers, "rows": rows})
    return lines


def _failure(fields: Dict[str, Any], wrong: int) -> Optional[str]:
    """Why the run fails: wrong elements, or an average bus bandwidth below --min-busbw; or None."""
    slow = fields.get("min_busbw")
    if wrong:
        return f"FAILED: {counted(wrong, 'wrong element')} (see the #wrong columns)"
    if slow and not slow["okay"]:
        return f"FAILED: the average bus bandwidth is below {slow['GBps']:g} GB/s ({slow['source']})"
    return None

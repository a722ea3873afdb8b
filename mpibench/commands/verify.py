"""mpibench verify: can the figures mpibench measures here be trusted (docs/verify.md)."""
import argparse
import os
import time
from statistics import median
from typing import Any, Dict, List, Optional, Tuple

from ..diagnose import hostfacts, iperf, rankfacts, verifyjudge
from ..errors import UsageError
from ..launch.session import Session
from ..measure import launchcost, selfcheck
from ..measure.backends import make as make_backend
from ..measure.backends.torchdist import TorchBackend
from ..measure.collectives import REGISTRY
from ..measure.dtypes import DTYPES
from ..measure.engine import Plan
from ..measure.modes import MODE_KEYS
from ..measure.row import Figures, Row
from ..measure.selfcheck import Rounds
from ..measure.sizes import sweep
from ..results import inputs, reader, verifytable
from ..results.numbers import counted
from ..results.output import RunOutput, open_output
from .common import guard, options

HELP = "check mpibench's own figures here: timer, per-call cost, correctness, plausibility, peers"
EXITS = "Exit 0 when every check passed, 1 when one failed, 2 on bad input."
PAGE = "docs/verify.md"

CPU_SIZES = "1M,4M,16M"
GPU_SIZES = "64M,256M,1G"
CPU_CHECK_SIZE = 64 << 10
GPU_CHECK_SIZE = 1 << 20
MAX_PEER_SIZES = 32
PEER_ROUNDS = 3             # NetPIPE 3.7's trials per size (TRIALS in netpipe.c)
Peer = Tuple[str, List[Row]]    # read_peer(): the tool, its rows


def _sizes(text: str) -> List[int]:
    sizes = sorted({options.size_arg(t.strip()) for t in text.split(",") if t.strip()})
    if not sizes or sizes[0] < 4:
        raise argparse.ArgumentTypeError(f"{text!r}: give sizes of at least 4 bytes")
    return sizes


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", type=_sizes, default=None, metavar="LIST",
                   help=f"sizes the two timers compare, comma-separated (default {CPU_SIZES} on "
                        f"CPUs, {GPU_SIZES} on GPUs); 8 bytes is added for the per-call cost")
    p.add_argument("--rounds", type=options.at_least(1), default=2, metavar="N",
                   help="rounds of the two timers at every size before its first "
                        "judgement, made even (default 2: the budget's pairs go where "
                        "they decide most)")
    p.add_argument("--budget", type=options.at_least(0, float), default=60.0, metavar="SECONDS",
                   help="the timers add pairs of rounds while a size is inconclusive until "
                        "they have taken SECONDS in all (default 60; 0: --rounds only)")
    p.add_argument("-n", "--iters", type=options.at_least(1), default=20,
                   help="timed iterations per loop (default 20)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=5,
                   help="warm-up iterations per loop (default 5)")
    p.add_argument("--timer-tolerance", type=options.positive_float, default=None, metavar="X",
                   help=f"the timers agree within X (default {verifyjudge.CPU_TIMER_TOLERANCE:g} "
                        f"on CPUs, {verifyjudge.GPU_TIMER_TOLERANCE:g} on GPUs)")
    options.add_min_share(p, "a finding: a figure", "iperf3's or the peer's", verifyjudge.FLOOR)
    p.add_argument("--check-size", type=options.size_arg, default=None, metavar="SIZE",
                   help="bytes of the correctness check's calls (default 64K on CPUs, 1M on GPUs)")
    p.add_argument("--iperf-seconds", type=options.at_least(0, float), default=3.0, metavar="S",
                   help="seconds of each iperf3 test between two hosts; 0 = off (default 3)")
    p.add_argument("--iperf-port", type=options.at_least(1), default=iperf.PORT,
                   metavar="PORT", help=f"iperf3's port (default {iperf.PORT})")
    p.add_argument("--sys-root", default="/", metavar="PATH",
                   help="read the link rates from /sys under PATH, as doctor (default /); "
                        "'{host}' in it becomes each host's name (for fabricated trees)")
    p.add_argument("--against", metavar="FILE",
                   help="a peer's output (NetPIPE's or nccl-tests' printed output, nccl-tests' "
                        "-J JSON, an mpibench JSON): its collective measured here at its sizes, "
                        "ratio mpibench / peer per size")
    guard.add_timeout(p, "one check, or one round of a timer", None,
                      "60 s plus the largest size's traffic at 1 GB/s")
    options.add_json(p)
    options.add_backend(p)


def read_peer(path: str) -> Peer:
    """The peer's tool and its rows of a collective and data type mpibench runs, or UsageError."""
    doc = reader.load(path)
    rows = [r for r in doc["results"] if r["collective"] in REGISTRY
            and r.get("dtype", r["type"]) in DTYPES]
    if not rows:
        raise UsageError(f"--against {path}: no row of a collective and data type mpibench runs")
    return doc.get("source") or doc.get("tool") or "peer", rows


def peer_plan(rows: List[Row], backend: TorchBackend, iters: int, warmup: int
              ) -> Tuple[List[Row], Plan]:
    first = rows[0]
    name, dtype = first["collective"], first.get("dtype", first["type"])
    same = [r for r in rows if (r["collective"], r.get("dtype", r["type"])) == (name, dtype)]
    sizes = sorted({r["size"] for r in same})
    powers = [s for s in sizes if s & (s - 1) == 0]
    sizes = (powers or sizes)[-MAX_PEER_SIZES:]
    modes = tuple(m for m, k in MODE_KEYS.items() if any(r.get(k) for r in same))
    coll = REGISTRY[name]
    op = first["redop"] if coll.reduces and first["redop"] in backend.ops else "sum"
    return same, Plan(collectives=[coll], sizes=sizes, dtypes=[DTYPES[dtype]],
                      ops=[op], root=max(first.get("root", 0), 0), iters=iters, warmup=warmup,
                      check=1, blocking=backend.default_blocking(), modes=modes or ("out", "in"),
                      probe_iters=0)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend = make_backend(session, args.backend[0])
    sizes = args.sizes or _sizes(GPU_SIZES if backend.cuda else CPU_SIZES)
    timed = sorted({8, *sizes})
    tolerance = args.timer_tolerance or (verifyjudge.GPU_TIMER_TOLERANCE if backend.cuda
                                         else verifyjudge.CPU_TIMER_TOLERANCE)
    judged = verifyjudge.GPU_JUDGED if backend.cuda else verifyjudge.CPU_JUDGED
    settings = {"rounds": args.rounds, "budget_s": args.budget, "iters": args.iters,
                "warmup": args.warmup, "timer_tolerance": tolerance}
    out = open_output(session, "verify", args)
    peer = inputs.on_rank0(session, args.against, read_peer, "--against") if args.against else None
    guard.arm(session, args.timeout or float(round(
        60 + (args.warmup + args.iters + 1) * 2 * max(sizes) / 1e9 + args.iperf_seconds)),
        "start-up (every rank's device and versions)")
    records, versions = rankfacts.gather(session)
    if session.rank == 0:
        assert out is not None
        verifytable.title(out)
        rankfacts.describe(session, out, [backend.name], records, versions,
                         {"sizes": sizes, **settings, "floor": args.min_share, "against": args.against})
        out.announce_files()
        verifytable.timers(out, args, backend, timed)
    measured = _measure(session, out, backend, args, timed, tolerance, judged, peer)
    session.watch.disarm()
    if session.rank != 0:
        return guard.verdict(session, None)
    assert out is not None
    checks, medians, figures = _verdicts(measured, backend, args, timed, tolerance, judged)
    verifytable.checks(out, checks)
    # The rows as `run` writes them (the median round's), for report and compare.
    out.set(results=[medians[s] for s in timed] + (measured["peer"] or {}).get("rows", []))
    out.set(verify={"checks": checks, **settings, "judged_from": judged, "timers": _timers(measured["got"]),
                    **figures, "iperf3": measured["pairs"], "against": args.against})
    out.finish()
    failed = verifyjudge.failed(checks)
    names = ", ".join(f"{c['check']} ({c['verdict']})" for c in failed)
    return guard.verdict(session, f"verify: {counted(len(failed), 'check')} did not pass: {names}"
                         if failed else None)


def _measure(session: Session, out: Optional[RunOutput], backend: TorchBackend, args: argparse.Namespace,
             timed: List[int], tolerance: float, judged: int, peer: Optional[Peer]) -> Dict[str, Any]:
    """Every rank: what the five checks judge, as a dict (the gathered parts on rank 0)."""
    # 1. The timers.
    found: Dict[str, Any] = {"got": _compare_timers(session, out, backend, args, timed, tolerance, judged)}
    # 2. The per-call cost: GPUs the launch (measure/launchcost), CPUs the harness over the bare loop.
    found["gpu_launch"] = selfcheck.gpu_launch_seconds(session, backend)
    small = [s for s in (sweep(8, judged // 4, 4) if backend.cuda else []) if s not in timed]
    found["sweep_rows"] = selfcheck.engine_rows(
        session, backend, selfcheck.all_reduce_plan(backend, small, args.iters, args.warmup))[0] \
        if small else None
    # 3. Correctness, every collective, both modes (GPUs: also through a CUDA graph's replay).
    check_size = args.check_size or (GPU_CHECK_SIZE if backend.cuda else CPU_CHECK_SIZE)
    passes = [("correctness", 0)] + ([("correctness -G 1", 1)] if backend.cuda else [])
    found["checked"] = [(label, *selfcheck.correctness(session, backend, check_size, graph))
                        for label, graph in passes]
    # 4. The hosts' link rates (all of each host's links together).
    session.watch.arm("verify: the hosts' link rates")
    found["ranks"] = session.size
    found["rates"] = session.comm.gather((session.hostname, hostfacts.total_line_rate(
        args.sys_root.replace("{host}", session.hostname))), root=0)
    # 5. iperf3 between every pair of hosts, then the peer's rows measured here.
    found["pairs"] = []
    if args.iperf_seconds > 0 and len(set(session.hosts)) > 1:
        session.watch.arm("verify: iperf3 between hosts")
        found["pairs"] = iperf.run_pairs(session, os.environ, args.iperf_seconds, args.iperf_port)
    found["peer"] = _measure_peer(session, backend, args, peer) if peer is not None else None
    return found


def _compare_timers(session: Session, out: Optional[RunOutput], backend: TorchBackend,
                    args: argparse.Namespace, timed: List[int], tolerance: float, judged: int
                    ) -> Optional[Rounds]:
    """mpibench's loop and the bare loop, a pair of rounds at a time, each round on disk as it comes."""
    def progress(got: Rounds, size: int) -> None:
        assert out is not None      # rank 0's
        verifytable.round_line(out, size, got[size])
        out.set(verify={"timers": _timers(got), "complete": False})
    start, rounds = time.monotonic(), args.rounds + args.rounds % 2

    def pick(got: Rounds) -> Optional[int]:
        # First every size its --rounds, the one that took least time first. Then, while the
        # judged sizes' pairs together are undecided, the size whose pairs cost least (the
        # most evidence per second); after that the undecided sizes, least time first; only
        # a pair that fits the budget, none after a FAIL.
        owed = [(got[s]["seconds"], s) for s in timed if len(got[s]["bare"]) < rounds]
        if owed:
            return min(owed)[1]
        checks = _timer_checks(got, tolerance, judged)
        if any(c["verdict"] == "FAIL" for c in checks.values()):
            return None
        left = args.budget - (time.monotonic() - start)
        cost = {s: 2 * g["seconds"] / len(g["bare"]) for s, g in got.items()}
        together = checks.pop(None, None)
        if together and together["verdict"] == "INCONCLUSIVE":
            todo = [(cost[s], s) for s in timed if s >= judged and cost[s] <= left]
        else:
            todo = [(got[s]["seconds"], s) for s, c in checks.items()
                    if s is not None and c["verdict"] == "INCONCLUSIVE" and cost[s] <= left]
        return min(todo)[1] if todo else None
    return selfcheck.compare_timers(session, backend, timed, iters=args.iters, warmup=args.warmup,
                                    progress=progress, pick=pick)


def _measure_peer(session: Session, backend: TorchBackend, args: argparse.Namespace, peer: Peer
                  ) -> Dict[str, Any]:
    """The peer's collective measured here at its sizes: {'tool', 'same' (the peer's rows
    compared), 'rows' (ours), 'wrong'}."""
    tool, rows = peer
    pbackend = make_backend(session, "mpi") if rows[0].get("backend") == "mpi" else backend
    same, plan = peer_plan(rows, pbackend, args.iters, args.warmup)
    # NetPIPE keeps the fastest of its trials: so does verify, of as many rounds.
    ours, wrong = selfcheck.repeated_rows(session, pbackend, plan, PEER_ROUNDS if tool == "NetPIPE" else 1)
    return {"tool": tool, "same": same, "rows": ours, "wrong": wrong}


def _verdicts(found: Dict[str, Any], backend: TorchBackend, args: argparse.Namespace, timed: List[int],
              tolerance: float, judged: int) -> Tuple[List[Dict[str, Any]], Dict[int, Row], Dict[str, Any]]:
    """Rank 0: (the checks in the order printed, the median row of each timed size, the
    per-call cost and link rates as the JSON keeps them)."""
    got = found["got"]
    checks = list(_timer_checks(got, tolerance, judged).values())
    timer_failed_short = any(c["verdict"] == "FAIL" and c["ratio"] < 1 for c in checks)
    medians = {s: selfcheck.median_row(got[s]["rows"], got[s]["harness"]) for s in timed}
    gpu_launch = found["gpu_launch"]
    harness_cost = median(h - b for h, b in zip(got[8]["harness"], got[8]["bare"]))
    times = {s: _in_place(medians[s])["time_us"] * 1e-6 for s in timed}
    times.update({r["requested_size"]: r["in_place"]["time_us"] * 1e-6
                  for r in found["sweep_rows"] or []})
    # Launch-bound rows are a GPU matter (the host starting kernels; -G the remedy).
    bound = max((s for s, t in times.items() if launchcost.launch_bound(t, gpu_launch)), default=None) \
        if gpu_launch else None
    checks.append(verifyjudge.per_call(harness_cost, gpu_launch, bound, min(times)))
    checks += [verifyjudge.correctness(rows, wrong, label) for label, rows, wrong in found["checked"]]
    busbw = _in_place(medians[max(timed)])["busbw_GBps"]
    per_host = dict(found["rates"])
    checks.append(verifyjudge.plausibility(
        max(timed), busbw, per_host, timer_failed_short, found["ranks"],
        verifyjudge.ring_only(backend.name, os.environ.get("NCCL_ALGO"))))
    checks += [verifyjudge.iperf_share(pair, max(timed), busbw, backend.name, args.min_share)
               for pair in found["pairs"]]
    peer = found["peer"]
    if peer is not None:
        checks += verifyjudge.peer_rows(peer["rows"], peer["same"], peer["tool"], args.min_share, judged)
        if peer["wrong"]:
            checks.append(verifyjudge.correctness(peer["rows"], peer["wrong"],
                                               f"{peer['tool']} rows checked"))
    cost = gpu_launch if gpu_launch is not None else harness_cost
    return checks, medians, {"per_call_s": cost, "launch_bound_up_to": bound,
                             "line_rates_gbps": per_host}


def _timer_checks(got: Rounds, tolerance: float, judged: int) -> Dict[Optional[int], Dict[str, Any]]:
    """{size: its timer check, None: the judged sizes' pairs together (when two or more);
    a size with too few pairs for an interval of its own is INFO, judged in the pool}."""
    checks: Dict[Optional[int], Dict[str, Any]] = {
        s: verifyjudge.timer(s, g["harness"], g["bare"], tolerance, judged) for s, g in sorted(got.items())}
    together = verifyjudge.timers_together(got, tolerance, judged)
    if not together:
        return checks
    for s, c in checks.items():
        if c["verdict"] == "INCONCLUSIVE" and "interval" not in c:     # too few pairs alone
            c.pop("rounds_needed")
            checks[s] = dict(c, verdict="INFO", reason=f"too few pairs to judge alone: "
                             f"judged with the other sizes ({together['check']})")
    return {**checks, None: together}


def _in_place(row: Row) -> Figures:
    """A timed row's in-place figures (the timers time all_reduce in place)."""
    figures = row["in_place"]
    assert figures is not None
    return figures


def _timers(got: Rounds) -> Dict[str, Dict[str, List[float]]]:
    return {str(s): {"harness_s": g["harness"], "bare_s": g["bare"]} for s, g in got.items()}


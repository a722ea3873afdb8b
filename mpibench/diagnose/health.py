"""`check --health`: one host's health check, as docs/commands/check.md ("One node's health
check") says: check's test inside the host and doctor's findings, one line, a drain."""
import argparse
import os
import subprocess
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Union

from ..errors import CheckFailed, UsageError
from ..launch import faults, verdict
from ..results.output import open_output
from . import checkjudge, findings, hostfacts

if TYPE_CHECKING:
    from ..launch.session import Session
    from ..measure.backends.timing import Call
    from ..measure.collectives.base import Collective
    from ..results.output import RunOutput

MODES = ("nhc", "npd")
TIMEOUT = 40.0          # the watchdog's limit: well inside HealthCheckProgram's 60 s
NPD_WIDTH = 80          # node-problem-detector cuts a plugin's message there
PREFIX = "mpibench:"    # drain reasons start with it, so that sites can find them
SLOWED = 1e4             # the test-only fault: the test inside the host at 1/10000 of its speed


class Timed(Protocol):
    """A test's collective timed: (args, where, barrier=None) -> its record (a group's barrier: that
    group alone)."""
    def __call__(self, args: argparse.Namespace, where: str, /,
                 barrier: Optional["Call"] = None) -> Dict[str, Any]: ...


class Retesting(Protocol):
    """What check's retest rounds need of rank 0's report."""
    judge: checkjudge.Judge

    def say_retest(self, test: int, lines: Sequence[str]) -> None: ...


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--health", nargs="?", const="nhc", choices=MODES, default=None,
                   help="this host's health check (test inside the host and doctor's "
                        "findings; one line; exit 0 healthy, 1 not): nhc (default) prints "
                        "NHC's 'host | Healthy' or 'host | ERROR: reason' and drains the node "
                        "with scontrol; npd prints one line for node-problem-detector")
    p.add_argument("--report-only", action="store_true",
                   help="with --health: report, drain nothing")


def check_args(args: argparse.Namespace) -> None:
    if args.report_only and not args.health:
        raise UsageError("--report-only goes with --health")
    if args.health and args.baseline:
        raise UsageError("--health takes --expect (its \"intra\" limits), not --baseline")


def run(session: "Session", args: argparse.Namespace, coll: "Collective", size: int, *,
        members: Mapping[str, List[int]], limits: Mapping[str, Dict[str, Any]],
        make_intra: Callable[[], Timed], retest: Callable[[Timed, Optional[Retesting]], None]) -> int:
    """Every rank of one host: the test inside it (make_intra()), measured again by retest()
    before a miss condemns it; rank 0 judges, prints the line, drains. 0, or CheckFailed."""
    if len(members) > 1:
        raise UsageError(f"check --health tests one host; this job has {len(members)}: "
                         f"start it on each host alone (sbatch/healthcheck.sh)")
    out = open_output(session, "check", args)
    assert session.watch is not None
    session.watch.arm("check --health: this host's facts")
    facts: Optional[Dict[str, Any]] = None
    judge: Optional[checkjudge.Judge] = None
    if session.rank == 0:
        facts = hostfacts.collect(session)
        judge = checkjudge.Judge({"collective": coll.name, "size": size, "ranks_per_host": session.size,
                                    "world": session.size, "hosts": [session.hostname],
                                    "iters": args.iters, "warmup": args.warmup},
                                   members, limits, {session.hostname: hostfacts.line_rate()})
    if session.size > 1:
        session.watch.arm("check --health: inside the host")
        timed = make_intra()

        def intra(a: argparse.Namespace, where: str, barrier: Optional["Call"] = None) -> Dict[str, Any]:
            return _slowed(session, timed(a, where, barrier))
        gathered = session.comm.gather(intra(args, "inside the host"), root=0)
        if judge:
            assert gathered is not None
            judge.intra(gathered)
        # what check's retest rounds need of rank 0's report: the judge; their words are
        # kept in the results file (the health check prints one line)
        retest(intra, SimpleNamespace(judge=judge, say_retest=lambda test, lines: None)
               if judge else None)
    session.watch.disarm()
    if session.comm.bcast(_verdict(session, out, args, judge, facts) if session.rank == 0 else None,
                          root=0):
        raise CheckFailed("")       # the line said it all
    return 0


def _slowed(session: "Session", t: Dict[str, Any]) -> Dict[str, Any]:
    """Test-only: slowhost:RANK[:HOST] stretches every call of this rank's test."""
    if faults.get("slowhost", session.rank) not in ("", session.hostname):    # off, or another host's
        return t
    return dict(t, seconds=t["seconds"] * SLOWED, times=[x * SLOWED for x in t["times"]])


def _verdict(session: "Session", out: Optional["RunOutput"], args: argparse.Namespace,
             judge: Optional[checkjudge.Judge], facts: Optional[Dict[str, Any]]) -> bool:
    """Rank 0: the verdict, the line, the drain; True when the host is not healthy."""
    assert out is not None and judge is not None and facts is not None
    host = session.hostname
    entry = judge.hosts[host]
    errors = [f[1] for f in findings.findings({host: facts}, True) if f.severity == findings.ERROR]
    reasons = entry["reasons"] + [f"doctor: {e}" for e in errors]
    if errors:
        entry.update(verdict="FAIL", reasons=reasons)
    node = os.environ.get("SLURMD_NODENAME") or host.split(".")[0]   # as SLURM names it to its scripts
    reason = (reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")) \
        if reasons else None
    drained = None
    if reason and args.health == "nhc" and not args.report_only:
        drained = drain(node, f"{PREFIX} {reason}")
        if drained is not True:
            verdict.note(f"could not drain {node}: {drained}")
    text = line(args.health, node, reason)
    out.set(check=judge.doc, health={"node": node, "healthy": not reasons, "reasons": reasons,
                                     "line": text, "drained": drained, "mode": args.health})
    out.finish()
    verdict.say_in_place(text)
    return bool(reasons)


def line(mode: str, node: str, reason: Optional[str]) -> str:
    """The one line: NHC's, or node-problem-detector's (at most NPD_WIDTH characters)."""
    if mode == "npd":
        text = f"{PREFIX} {node} " + (f"unhealthy: {reason}" if reason else "healthy")
        return text if len(text) <= NPD_WIDTH else text[:NPD_WIDTH - 3] + "..."
    return f"{node} | " + (f"ERROR: {PREFIX} {reason}" if reason else "Healthy")


def drain(node: str, reason: str) -> Union[bool, str]:
    """scontrol drains the node with the reason; True when it did, else why not (text)."""
    argv = ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    except FileNotFoundError:
        return "scontrol not found: not drained"
    except subprocess.TimeoutExpired:
        return "scontrol did not answer in 15 s: not drained"
    return True if done.returncode == 0 else \
        "scontrol failed: " + (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]

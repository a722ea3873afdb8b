"""What verify prints: its header, each round of the timers, the table of checks and verdicts."""
from typing import Any, Dict, List

from ..measure.sizes import format_size
from .numbers import us
from .output import RunOutput
from .tables import commented


def title(out: RunOutput) -> None:
    out.say("# mpibench verify: can mpibench's figures be trusted on these hosts?")


def timers(out: RunOutput, args: Any, backend: Any, timed: List[int]) -> None:
    """What the timers will compare."""
    clock = ("host clock, device synchronize" if backend.cuda
             else "MPI_Wtime" if backend.name == "mpi" else "monotonic clock")
    out.say(f"# timers: {args.rounds + args.rounds % 2} rounds (more while a size is "
            f"inconclusive, up to {args.budget:g} s), each mpibench's loop and the bare loop "
            f"({clock}) in turn, {args.iters} iterations after {args.warmup} warm-up, "
            f"all_reduce float32 in place at {', '.join(format_size(s) for s in timed)}")


def round_line(out: RunOutput, size: int, got: Dict[str, List[float]]) -> None:
    """One round of the timers at size: got, its times so far ('harness', 'bare')."""
    out.say(f"# round {len(got['bare'])}, {format_size(size)}: mpibench "
            f"{us(got['harness'][-1])} us, bare loop {us(got['bare'][-1])} us")


def checks(out: RunOutput, checks: List[Dict[str, Any]]) -> None:
    """The table of the checks (as verdicts.check() makes them), a line per check not passed."""
    ratio = ["" if c["ratio"] is None else f"{c['ratio']:.3f}" + (   # and its confidence interval
        f" ({ci[0]:.3f}-{ci[1]:.3f})" if (ci := c.get("interval")) else "") for c in checks]
    rows = [[c["check"], c["figure"], c["reference"], r, c["verdict"]] for c, r in zip(checks, ratio)]
    notes = [f"# {c['verdict']} {c['check']}: {c['reason']}" for c in checks
             if c["reason"] and c["verdict"] not in ("PASS",)]
    out.say("#", *commented(rows, ["check", "figure", "reference", "ratio", "verdict"]), *notes)

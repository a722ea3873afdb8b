"""Test-only fault switches (docs/testing.md), read from MPIBENCH_FAULT and honoured only with
MPIBENCH_TESTING=1: a variable left exported after a test session changes nothing, and every
command's header and results document say it is set (notice()). Those that act inside the
engine and the backend are installed by measure.switches.install(): with none on, the timed
code has no test branch."""
import os
import signal
import time
from typing import Dict, Iterator, List, Optional, Tuple, Union


def _spec() -> str:
    return os.environ.get("MPIBENCH_FAULT", "").strip()


def active() -> bool:
    return bool(_spec()) and os.environ.get("MPIBENCH_TESTING") == "1"


def notice() -> Optional[Tuple[str, Dict[str, Union[str, bool]]]]:
    """(header line, results-document record) when MPIBENCH_FAULT is set, else None."""
    spec, on = _spec(), active()
    if not spec:
        return None
    line = (f"# TEST SWITCHES ACTIVE: MPIBENCH_FAULT={spec}" if on else
            f"# TEST SWITCHES SET BUT IGNORED: MPIBENCH_FAULT={spec} (MPIBENCH_TESTING is not 1)")
    return line, {"MPIBENCH_FAULT": spec, "active": on}


def _entries() -> Iterator[Tuple[str, int, str]]:
    if not active():
        return
    for item in _spec().split(","):
        parts = item.strip().split(":", 2)
        if len(parts) >= 2 and parts[1].strip().isdigit():
            yield parts[0].strip(), int(parts[1]), (parts[2] if len(parts) == 3 else "")


def get(kind: str, rank: int) -> Optional[str]:
    """The fault's argument ('' when it has none) if KIND is switched on for RANK, else None."""
    return next((arg for k, r, arg in _entries() if k == kind and r == rank), None)


def row_faults(rank: int) -> List[Tuple[str, str]]:
    """[(size as written, kind)] of the row faults (hang, die, crash) switched on for RANK."""
    return [(arg, kind) for kind, r, arg in _entries() if kind in ("hang", "die", "crash") and r == rank]


def slowdown(rank: int, test: str, first: bool) -> float:
    """The factor by which slow:RANK:TEST[/F] (every measurement) or slowonce:RANK:TEST[/F]
    (the rank's first measurement of TEST only) stretch this rank's times (1.0: off)."""
    for kind, r, arg in _entries():
        name, _, factor = arg.partition("/")
        if r == rank and name == test and (kind == "slow" or (kind == "slowonce" and first)):
            try:
                return max(1.0, float(factor or 4))
            except ValueError:
                return 4.0
    return 1.0


def trip(kind: Optional[str]) -> None:
    """Make the fault happen (kind None: nothing)."""
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "crash":
        raise RuntimeError("test fault switch MPIBENCH_FAULT=crash made this rank fail")
    if kind == "loopcrash":
        raise RuntimeError("test fault switch MPIBENCH_FAULT=loopcrash made this rank fail "
                           "inside its timed loop")

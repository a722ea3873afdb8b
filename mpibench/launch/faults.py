"""Test-only fault switches, read from MPIBENCH_FAULT.

Comma-separated entries KIND:RANK[:ARG], e.g. "raise:1", "corrupt:2", "oom:1:64K" (a
buffer of 64K or more, or train's model state of that size, is refused as out of memory).
Row faults, at the first row of size ARG: "hang:1:64K" (the rank stops making progress,
its watchdog thread still answers), "die:1:64K" (SIGKILL, as the OOM killer would),
"crash:1:64K" (an exception).
Signals, when the rank starts a step (watchdog.arm) whose name holds ARG:
"stop:1:round 1" (SIGSTOP), "sigterm:2:all_gather", "sigint:1:demo". Input files:
"unreadable:0" (the rank cannot read any input file; only rank 0 reads them).
Tests use them to prove that a fault on one rank is caught and named; nothing sets
them in normal use.
"""
import os
import signal
import time


def _entries():
    spec = os.environ.get("MPIBENCH_FAULT", "")
    for item in spec.split(","):
        parts = item.strip().split(":", 2)
        if len(parts) >= 2 and parts[1].strip().isdigit():
            yield parts[0].strip(), int(parts[1]), (parts[2] if len(parts) == 3 else "")


def get(kind, rank):
    """The fault's argument ('' when it has none) if KIND is switched on for RANK, else None."""
    for k, r, arg in _entries():
        if k == kind and r == rank:
            return arg
    return None


ROW_FAULTS = ("hang", "die", "crash")


def row_faults(rank):
    """[(size as written, kind)] of the row faults switched on for RANK."""
    return [(arg, kind) for kind, r, arg in _entries() if kind in ROW_FAULTS and r == rank]


def trip(kind):
    """Make the fault happen (kind None: nothing)."""
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "crash":
        raise RuntimeError("test fault switch MPIBENCH_FAULT=crash made this rank fail")

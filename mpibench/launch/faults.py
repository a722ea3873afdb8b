"""Test-only fault switches, read from MPIBENCH_FAULT.

Comma-separated entries KIND:RANK[:ARG], e.g. "raise:1", "corrupt:2", "oom:1:64K" (a
buffer of 64K or more, or train's model state of that size, is refused as out of memory).
Row faults, at the first row of size ARG: "hang:1:64K" (the rank stops making progress,
its watchdog thread still answers), "die:1:64K" (SIGKILL, as the OOM killer would),
"crash:1:64K" (an exception).
"early:1:100": the engine's timer on rank 1 stops early, at 1/100 of the loop's time
(what `verify`'s plausibility check must catch).
"backend:1:nccl": --backend auto answers nccl on that rank, as if its torch saw a GPU.
"graphcorrupt:1": with -G, the check's CUDA graph on that rank also adds 1 to the first
received element, which only a replay of the graph does (GPU tests).
"replica:1:1e-9": train's loss of that replica on the shared batch is off by that share.
"ncclcheck:1": doctor starts its NCCL probe on that rank even without a GPU (the probe
then fails to run, as a broken install would make it).
Signals, when the rank starts a step (watchdog.arm) whose name holds ARG:
"stop:1:round 1" (SIGSTOP), "sigterm:2:all_gather", "sigint:1:demo". Input files:
"unreadable:0" (the rank cannot read any input file; only rank 0 reads them).
"trustlogs:0": the nccl-tests log reader skips its checks of mixed or cut lines (sizes
that run backwards, an average its rows contradict, a stray or repeated rank line), so
that its fuzz test can prove it notices what those checks stop.
"counter:1[:NAME]": check reads an error counter NAME (default symbol_error) as moved by
one on that rank's host in every round.
"slow:1:intra" / "slowonce:1:intra": check's times on that rank in its test TEST (intra,
pair or job) stretched 4 times, in every measurement of it, or in its first one only
(a fault that a retest does not find again); "slow:1:job/50" stretches them 50 times.
In the pair test the rank's rail is slowed on every path it is on.
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


def early_factor(rank):
    """The factor by which the test fault switch early:RANK:X shortens the timed loops'
    time on this rank (1.0 when it is off)."""
    arg = get("early", rank)
    try:
        return max(1.0, float(arg)) if arg else 1.0
    except ValueError:
        return 1.0


def slowdown(rank, test, first):
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

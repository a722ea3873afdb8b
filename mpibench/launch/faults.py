"""Test-only fault switches, read from MPIBENCH_FAULT and honoured only when MPIBENCH_TESTING=1
is set as well: a variable left exported after a test session changes nothing. Whenever
MPIBENCH_FAULT is set, every command's header and results document say so (notice()).

Comma-separated entries KIND:RANK[:ARG], e.g. "raise:1", "corrupt:2", "oom:1:64K" (a
buffer of 64K or more, or train's model state of that size, is refused as out of memory).
Row faults, at the first row of size ARG or more: "hang:1:64K" (the rank stops making
progress, its watchdog thread still answers), "die:1:64K" (SIGKILL, as the OOM killer
would), "crash:1:64K" (an exception).
"corrupt:1" writes the poison value (what recv held before the call) into the first
output element of every checked call on that rank; "corrupt:1:nan" writes NaN (float types).
"early:1:100": the engine's timer on rank 1 stops early, at 1/100 of the loop's time
(what `verify`'s plausibility check must catch).
"backend:1:nccl": --backend auto answers nccl on that rank, as if its torch saw a GPU.
"graphcorrupt:1": with -G, the check's CUDA graph on that rank also adds 1 to the first
received element, which only a replay of the graph does (GPU tests).
"replica:1:1e-9": train's loss of that replica on the shared batch is off by that share.
"ncclcheck:1": doctor starts its NCCL probe on that rank even without a GPU (the probe
then fails to run, as a broken install would make it); "ncclcheck:1:ID/ID" also makes the
rank see GPUs of those ids (default: one of its own) when doctor picks its device.
Signals, when the rank starts a step (watchdog.arm) whose name holds ARG:
"stop:1:round 1" (SIGSTOP), "sigterm:2:all_gather", "sigint:1:demo". Input files:
"unreadable:0" (the rank cannot read any input file; only rank 0 reads them).
"trustlogs:0": the nccl-tests log reader skips its checks of mixed or cut lines (sizes
that run backwards, an average its rows contradict, a stray or repeated rank line), so
that its fuzz test can prove it notices what those checks stop.
"counter:1[:NAME]": check reads an error counter NAME (default symbol_error) as moved by
one on that rank's host in every round.
"slowhost:1[:HOST]": check --health's test inside the host reports that rank's time 10000
times longer (on host HOST only, when given): a host whose GPUs are slow, for the drain
tests (give it for every rank of the host, as a collective waits for its slowest rank).
"slow:1:intra" / "slowonce:1:intra": check's times on that rank in its test TEST (intra,
pair or job) stretched 4 times, in every measurement of it, or in its first one only
(a fault that a retest does not find again); "slow:1:job/50" stretches them 50 times.
In the pair test the rank's rail is slowed on every path it is on.
Tests use them to prove that a fault on one rank is caught and named; nothing sets
them in normal use. The switches that act inside the engine and the backend (row faults,
early, corrupt, graphcorrupt, oom) are installed by measure.switches.install(): with none
on, the timed code runs as it is, with no test branch in it.
"""
import os
import signal
import time


def _spec():
    return os.environ.get("MPIBENCH_FAULT", "").strip()


def active():
    """Whether the switches act: MPIBENCH_FAULT set and MPIBENCH_TESTING=1."""
    return bool(_spec()) and os.environ.get("MPIBENCH_TESTING") == "1"


def notice():
    """(header line, results-document record) when MPIBENCH_FAULT is set, else None."""
    spec, on = _spec(), active()
    if not spec:
        return None
    line = (f"# TEST SWITCHES ACTIVE: MPIBENCH_FAULT={spec}" if on else
            f"# TEST SWITCHES SET BUT IGNORED: MPIBENCH_FAULT={spec} (MPIBENCH_TESTING is not 1)")
    return line, {"MPIBENCH_FAULT": spec, "active": on}


def _entries():
    if not active():
        return
    for item in _spec().split(","):
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


def trip(kind):
    """Make the fault happen (kind None: nothing)."""
    if kind == "hang":
        while True:
            time.sleep(3600)
    if kind == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "crash":
        raise RuntimeError("test fault switch MPIBENCH_FAULT=crash made this rank fail")

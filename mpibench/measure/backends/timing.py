"""The timed loops, one per -z mode (BLOCKING), as nccl-tests 2.19.6 runs them
(src/common.cu, startColl, completeColl and BenchTime).

The time is the host's wall clock from the first launch until the last call has finished,
as nccl-tests' timer: no event or sync of another stream can end it early. The barrier is
the side channel's (MPI), as nccl-tests' Barrier is MPI_Barrier. Each loop holds nothing
but the calls, the waits and (modes 1 and 3) the barriers.
"""
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple

Call = Callable[[], Any]          # one bound call (a CPU backend's -z 0 calls return a handle)
Sync = Optional[Callable[[], Any]]  # a finish or a barrier, None where the mode has none
Wait = Callable[[Any], Any]       # completes one handle

BLOCKING = {0: "launch all, wait once",
            1: "wait and barrier after each call (barrier timed)",
            2: "wait after each call",
            3: "wait and barrier after each call (barrier not timed)"}


def seconds(calls: Sequence[Call], mode: int, finish: Sync = None, barrier: Sync = None,
            wait: Optional[Wait] = None, window: int = 1) -> float:
    """Seconds for running every call once, in order, in -z mode `mode`. finish(): waits for
    every call launched so far (a GPU stream's synchronize). wait(handle): completes one
    handle, where calls return handles (CPU backends, -z 0); at most `window` in flight."""
    if mode == 0 and wait is not None:
        return _windowed(calls, wait, window)
    if mode == 3:
        return _barrier_untimed(calls, finish, needed_barrier(barrier))
    return _each(calls, finish if mode else None, needed_barrier(barrier) if mode == 1 else None,
                 finish if mode == 0 else None)


def _each(calls: Sequence[Call], finish: Sync, barrier: Sync, finish_once: Sync) -> float:
    perf = time.perf_counter
    steps = [step for step in (finish, barrier) if step is not None]
    if len(steps) == 2:
        first, second = steps
        t0 = perf()
        for call in calls:
            call()
            first()
            second()
        return perf() - t0
    if steps:
        step = steps[0]
        t0 = perf()
        for call in calls:
            call()
            step()
        return perf() - t0
    t0 = perf()
    for call in calls:
        call()
    if finish_once is not None:
        finish_once()
    return perf() - t0


def needed_barrier(barrier: Sync) -> Call:
    """-z 1 and 3 (and -G's start) cannot run without a barrier."""
    if barrier is None:
        raise ValueError("-z 1, -z 3 and -G need the side channel's barrier")
    return barrier


def _barrier_untimed(calls: Sequence[Call], finish: Sync, barrier: Call) -> float:
    """nccl-tests' -z 3: collOnlySec sums each call's own time; the barriers fall outside."""
    perf = time.perf_counter
    total = 0.0
    if finish is None:
        for call in calls:
            t0 = perf()
            call()
            total += perf() - t0
            barrier()
        return total
    for call in calls:
        t0 = perf()
        call()
        finish()
        total += perf() - t0
        barrier()
    return total


def _windowed(calls: Sequence[Call], wait: Wait, window: int) -> float:
    """Call i waits for call i - window first: with window at most the distinct buffer
    slots the calls cycle through, calls in flight never share one."""
    n = len(calls)
    handles = [None] * n
    perf = time.perf_counter
    t0 = perf()
    for i in range(n):
        if i >= window:
            wait(handles[i - window])
        handles[i] = calls[i]()
    for i in range(max(0, n - window), n):
        wait(handles[i])
    return perf() - t0


# ---- -I 1: a mark at every iteration boundary ----
# Separate loops, so that the loops above stay as they are without -I. marks[j]() runs at
# boundary j into a list allocated before the loop: time.perf_counter on CPUs, a CUDA
# event's record on GPUs (nccl-tests records one event per iteration).

def marks_needed(n: int, mode: int) -> int:
    """Boundaries of n iterations; with -z 3 a pair around each call, barriers outside."""
    return 2 * n if mode == 3 else n + 1


def seconds_marked(calls: Sequence[Call], mode: int, marks: Sequence[Call], finish: Sync = None,
                   barrier: Sync = None, wait: Optional[Wait] = None,
                   window: int = 1) -> Tuple[float, List[Any]]:
    """(seconds(), stamps): stamps[j] what marks[j]() returned. With calls in flight (CPU
    backends, -z 0) iteration i ends when a wait sees call i complete, so the iterations'
    times add up to the loop's."""
    if mode == 0 and wait is not None:
        return _windowed_marked(calls, wait, window, marks)
    if mode == 3:
        return _paired_marked(calls, finish, needed_barrier(barrier), marks)
    return _each_marked(calls, finish if mode else None, needed_barrier(barrier) if mode == 1 else None,
                        finish if mode == 0 else None, marks)


def _each_marked(calls: Sequence[Call], finish: Sync, barrier: Sync, finish_once: Sync,
                 marks: Sequence[Call]) -> Tuple[float, List[Any]]:
    n = len(calls)
    stamps = [None] * (n + 1)
    perf = time.perf_counter
    t0 = perf()
    for i in range(n):
        stamps[i] = marks[i]()
        calls[i]()
        if finish is not None:
            finish()
        if barrier is not None:
            barrier()
    stamps[n] = marks[n]()
    if finish_once is not None:
        finish_once()
    return perf() - t0, stamps


def _paired_marked(calls: Sequence[Call], finish: Sync, barrier: Call,
                   marks: Sequence[Call]) -> Tuple[float, List[Any]]:
    n = len(calls)
    stamps = [None] * (2 * n)
    perf = time.perf_counter
    total = 0.0
    for i in range(n):
        t0 = perf()
        stamps[2 * i] = marks[2 * i]()
        calls[i]()
        if finish is not None:
            finish()
        stamps[2 * i + 1] = marks[2 * i + 1]()
        total += perf() - t0
        barrier()
    return total, stamps


def _windowed_marked(calls: Sequence[Call], wait: Wait, window: int,
                     marks: Sequence[Call]) -> Tuple[float, List[Any]]:
    n = len(calls)
    handles = [None] * n
    stamps = [None] * (n + 1)
    perf = time.perf_counter
    t0 = perf()
    stamps[0] = marks[0]()
    for i in range(n):
        if i >= window:
            wait(handles[i - window])
            stamps[i - window + 1] = marks[i - window + 1]()
        handles[i] = calls[i]()
    for i in range(max(0, n - window), n):
        wait(handles[i])
        stamps[i + 1] = marks[i + 1]()
    return perf() - t0, stamps


def intervals(stamps: Sequence[float], mode: int) -> List[float]:
    if mode == 3:
        return [stamps[2 * i + 1] - stamps[2 * i] for i in range(len(stamps) // 2)]
    return [b - a for a, b in zip(stamps, stamps[1:])]

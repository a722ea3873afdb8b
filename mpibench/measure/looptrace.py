"""Test-only: what one timed loop did, switched on by MPIBENCH_TRACE_LOOPS=1.

Counts the loop's side-channel barriers, its calls in flight and launches made while a call
on overlapping memory was in flight (S), and the views all zero at the start (Z). Each rank
writes to stderr, per timed loop:

    looptrace rank R: ROW: calls C barriers B most-in-flight M sharing S
    looptrace rank R: ROW: views V all-zero Z

Tests use it to prove the -z modes' barriers, buffer use and initial data. The wrappers add
Python work to the loop: times measured with it on mean nothing.
"""
import os
from typing import Any, List, Optional, Sequence, Tuple

from ..launch import verdict
from .collectives.base import Call, Tensor

Spans = Tuple[Tuple[int, int], ...]

ON = os.environ.get("MPIBENCH_TRACE_LOOPS") == "1"


def spans(views: Sequence[Tensor]) -> Spans:
    """The byte ranges [start, stop) of one call's views."""
    return tuple((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in views)


def overlap(a: Spans, b: Spans) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


class Trace:
    def __init__(self, barrier: Call) -> None:
        self._barrier = barrier
        self.calls_made = self.barriers = self.most = self.sharing = self.views = self.zero_views = 0
        self.live: List[Spans] = []

    def barrier(self) -> None:
        self.barriers += 1
        self._barrier()

    def calls(self, calls: Sequence[Call], views: Sequence[Tuple[Tensor, Tensor]]) -> List[Call]:
        """calls wrapped; call i runs on views[i % len(views)], as the engine binds them."""
        self.views = len(views)
        self.zero_views = sum(1 for view in views if not any(bool(t.any()) for t in view))
        return [self._wrap(call, spans(views[i % len(views)])) for i, call in enumerate(calls)]

    def _wrap(self, call: Call, mine: Spans) -> Call:
        def launch() -> Optional[_Handle]:
            self.calls_made += 1
            self.sharing += sum(1 for other in self.live if overlap(other, mine))
            self.live.append(mine)
            self.most = max(self.most, len(self.live))
            handle = call()
            if handle is None:           # a blocking call: finished on return
                self.live.remove(mine)
                return None
            return _Handle(handle, self, mine)
        return launch

    def report(self, rank: int, row: str) -> None:
        verdict.err(f"looptrace rank {rank}: {row}: calls {self.calls_made} barriers "
                    f"{self.barriers} most-in-flight {self.most} sharing {self.sharing}\n"
                    f"looptrace rank {rank}: {row}: views {self.views} all-zero {self.zero_views}")


class _Handle:
    """A torch Work or an MPI Request that leaves the trace's in-flight list when waited."""

    def __init__(self, handle: Any, trace: Trace, mine: Spans) -> None:
        self.handle, self.trace, self.mine = handle, trace, mine

    def wait(self) -> None:        # Wait: an MPI Request's, wait: a torch Work's
        (self.handle.Wait if hasattr(self.handle, "Wait") else self.handle.wait)()
        self.trace.live.remove(self.mine)

    Wait = wait

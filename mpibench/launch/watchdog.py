"""The hang watchdog and signal handler: one thread per rank beside the benchmark.

The main thread says where it is by attribute stores outside the timed loops: arm(where) before
each step (a fresh deadline), mark(phase) between phases, disarm() when done. In a timed loop
the thread looks at its deadline only, and serves the side channel once a second when the loop
has lasted a second (a rank that failed asks where the others are: one in a long loop must
answer, not be taken for dead); the mark that ends the loop wakes it to serve the rest.
- A deadline passes: the thread asks every rank where it is over MPI (a duplicate of COMM_WORLD,
  independent of NCCL/gloo); a rank asked so joins in at once. No answer within the grace: that
  rank is stopped, dead or stuck holding the interpreter; an answer from an earlier step: it never
  arrived. The lowest rank that answered reports once, rank 0 marks the results file incomplete,
  and the job is aborted with exit code 124.
- A rank fails on its own (fail()): it asks every rank where it is, saying why; rank 0 marks
  the results file failed (code 1) as soon as it hears, and every rank that heard takes the
  launcher's SIGTERM that follows the failed rank's abort as part of that end, not a new one.
- SIGINT / SIGTERM: rank 0 marks the results file incomplete, prints a closing line and ends the
  job with 128 + the signal number; another rank passes its signal on to rank 0 first (and ends
  the job itself if rank 0 does not). Without MPI this rank does it all alone.
"""
import os
import select
import signal
import threading
import time
from collections import Counter
from contextlib import suppress
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple,
                    Union)

from . import faults, verdict
from .comm import Comm, MPIComm

if TYPE_CHECKING:
    from mpi4py import MPI

TIMEOUT_CODE = 124
TAG_QUERY, TAG_REPLY, TAG_NOTICE, TAG_ENDING = 7101, 7102, 7103, 7104
SIGNALS = (signal.SIGINT, signal.SIGTERM)
IDLE_POLL = 0.25     # seconds between looks at the deadline and the side channel
# The phase of the timed loops: the thread only looks at its deadline then. Serving the side
# channel would compete with the loop for the MPI progress lock (--backend mpi) and the CPU;
# a loop that has lasted LOOP_SERVE seconds is served once per LOOP_SERVE (one Iprobe), so
# that a failed rank's question is answered within its grace (at least 2 s).
TIMED_LOOP = "timed loop"
LOOP_SERVE = 1.0
BUSY_POLL = 0.02     # while waiting for answers
FAILED = "failed"    # the phase of a rank that raised an error of its own


class Watched(Protocol):
    """What the watchdog reads of its rank's Session (session.py)."""
    comm: Comm
    rank: int
    size: int
    hosts: List[str]
    hostname: str

    @property
    def where(self) -> str: ...
    def out(self, text: str = "") -> None: ...


# A rank's answer to "where are you?": (step, where, phase, host, whether it said its verdict)
Snapshot = Tuple[int, str, str, str, bool]
# why a rank asks: "timeout", or ("failed", reason)
Why = Union[str, Tuple[str, str]]


class Watchdog:
    def __init__(self, session: Watched, timeout: float) -> None:
        self.s, self.timeout = session, timeout
        self.step = 0
        self.where, self.phase = "start-up", ""
        self.deadline: Optional[float] = None
        # rank 0: on_fault(reason, verdict record) closes the results document when a hang or
        # a signal ends the job, so that what was measured stays; it says what became of it
        self.on_fault: Optional[Callable[[str, Dict[str, Any]], str]] = None
        # its own channel needs MPI_THREAD_MULTIPLE; without it this rank watches alone
        comm = session.comm
        self.comm = comm.world.Dup() if isinstance(comm, MPIComm) and comm.threads else None
        self._lock = threading.Lock()     # one reader of the side channel at a time
        self._probe_id = 0
        self._replies: Dict[Tuple[int, int], Dict[int, Snapshot]] = {}
        self._sends: List["MPI.Request"] = []
        self._joined = False       # a timeout is being handled
        self._asked = False        # another rank timed out and asked us
        self.signalled: Optional[int] = None   # the first SIGINT/SIGTERM this rank received
        self._ending = threading.Lock()   # one end of the job per rank
        # (when, lines, code): end the job ourselves unless aborted first
        self._deferred: Optional[Tuple[float, List[str], int]] = None
        self._stop = False
        self._owed = False         # the thread skipped the side channel during a timed loop
        self._quiet = False        # another rank is aborting the job: no more MPI calls here
        # (rank, reason): the first rank heard to have failed on its own
        self.failure: Optional[Tuple[int, str]] = None
        self._recorded = False     # rank 0: a failure is in the results file
        self._loop = (0, 0.0)      # (step, when the side channel was last served) in a timed loop
        self._rfd, self._wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._saved = None
        # test only: "stop:RANK:WHERE", "sigterm:RANK:WHERE", "sigint:RANK:WHERE" send this
        # rank that signal when it starts a step whose name holds WHERE (see arm())
        self._raise_at = [(sig, at) for kind, sig in (("stop", signal.SIGSTOP), ("sigterm", signal.SIGTERM),
                                                      ("sigint", signal.SIGINT))
                          if (at := faults.get(kind, session.rank)) is not None]
        if threading.current_thread() is threading.main_thread():
            # Handlers that do nothing: the C-level one has already written the signal to the
            # wakeup pipe, which the thread reads even while the main thread is in a collective.
            old_fd = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
            self._saved = (old_fd, {s: signal.signal(s, lambda *_: None) for s in SIGNALS})
        self._thread = threading.Thread(target=self._run, name="mpibench-watchdog", daemon=True)
        self._thread.start()

    @property
    def grace(self) -> float:
        """How long a rank may take to answer 'where are you?' before it counts as gone."""
        return min(10.0, max(2.0, self.timeout / 10))

    # ---- main thread: where this rank is (attribute stores only) ----
    def arm(self, where: str, phase: str = "setting up") -> None:
        self.where = where
        self.deadline = time.monotonic() + self.timeout
        self.mark(phase)
        for sig, at in self._raise_at:
            if at in where:
                os.kill(os.getpid(), sig)

    def mark(self, phase: str) -> None:
        self.step += 1
        self.phase = phase
        # out of a timed loop in which the thread skipped the side channel: wake it at once,
        # so that a notice or a question waits no longer than the loop
        if self._owed and phase != TIMED_LOOP:
            self._owed = False
            self._wake()

    def _wake(self) -> None:
        with suppress(OSError):
            os.write(self._wfd, b"\0")        # 0 is no signal: the thread only wakes

    def disarm(self) -> None:
        self.deadline = None

    def close(self) -> None:
        """Stop watching (end of the command); signals go back to what they were. Once: a
        second call does nothing."""
        if self._stop:
            return
        self.deadline = None
        self._stop = True
        self._wake()                      # now, not at its next poll
        self._thread.join(timeout=2 * IDLE_POLL + 1)
        if self._saved is not None and threading.current_thread() is threading.main_thread():
            old_fd, handlers = self._saved
            signal.set_wakeup_fd(old_fd)
            for s, h in handlers.items():
                signal.signal(s, h)
            self._saved = None
        for fd in (self._rfd, self._wfd):
            with suppress(OSError):
                os.close(fd)
        if self.comm is not None:
            with suppress(Exception):
                self.comm.Free()
            self.comm = None

    def fail(self, reason: str) -> Tuple[List[int], bool]:
        """This rank failed on its own (reason: where and what, in words); (the ranks that do
        not answer within the grace, whether this rank reports the failure: none has reported
        one and no lower rank failed too)."""
        self.mark(FAILED)
        self._heard_failure(self.s.rank, reason)
        snaps = self._probe(("failed", reason))
        failed = [r for r, s in snaps.items() if s[2] == FAILED]
        reports = min(failed) == self.s.rank and not any(s[4] for s in snaps.values())
        if self.comm is None:       # no one could be asked: no one is named
            if self.s.rank != 0 and self._alone_mpi():
                # its error may be the news of another rank's abort: the launcher's kill, if
                # it comes within the grace, ends this rank without a second verdict
                time.sleep(self.grace)
            return [], reports
        return [r for r in range(self.s.size) if r not in snaps], reports

    def _heard_failure(self, rank: int, reason: str) -> None:
        """A rank (this one too) failed on its own and will end the job: rank 0 records code 1
        in the results file, once."""
        if self.failure is None:
            self.failure = (rank, reason)
        if self.s.rank == 0 and not self._recorded:
            self._recorded = True
            self.abandon(reason, 1, "error")

    # ---- the thread ----
    def _run(self) -> None:
        while not self._stop:
            try:
                ready, _, _ = select.select([self._rfd], [], [], IDLE_POLL)
            except (OSError, ValueError):
                return
            if self._stop:
                return
            data = b""
            if ready:
                with suppress(OSError):
                    data = os.read(self._rfd, 64)
            for signum in data:
                if signum in SIGNALS:
                    self._on_signal(signum, self.s.rank)
            if self.phase == TIMED_LOOP and not self._loop_served():
                self._owed = True
            elif not self._quiet:       # quiet: another rank is aborting the job
                self._serve()
            deadline = self.deadline
            if not self._quiet and (self._asked or (deadline is not None
                                                    and time.monotonic() > deadline)):
                self._timeout()
            if self._deferred is not None and time.monotonic() > self._deferred[0]:
                _, lines, code = self._deferred
                self._end(lines, code)

    def _loop_served(self) -> bool:
        """In a timed loop: whether to serve the side channel now (the loop has lasted
        LOOP_SERVE seconds since it began or was last served)."""
        now, (step, since) = time.monotonic(), self._loop
        if step != self.step:
            self._loop = (self.step, now)
            return False
        if now - since < LOOP_SERVE:
            return False
        self._loop = (step, now)
        return True

    def _snapshot(self) -> Snapshot:
        return (self.step, self.where, self.phase, self.s.hostname, verdict.said())

    def _serve(self) -> None:
        """Answer questions, take notices, collect answers; never blocks."""
        if self.comm is None:
            return
        from mpi4py import MPI
        status = MPI.Status()
        with self._lock:
            while True:
                try:
                    if not self.comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
                        break
                    source, tag = status.Get_source(), status.Get_tag()
                    msg = self.comm.recv(source=source, tag=tag)
                except Exception:
                    return
                if tag == TAG_QUERY:
                    key, why = msg
                    self._send((key, self._snapshot()), source, TAG_REPLY)
                    if why == "timeout":
                        self._asked = True           # the job is stuck: handle it here too
                    elif why[0] == "failed":
                        self._heard_failure(source, why[1])
                elif tag == TAG_REPLY:
                    key, snap = msg
                    if key in self._replies:
                        self._replies[key][source] = snap
                elif tag == TAG_NOTICE:
                    signum, origin = msg
                    if self.s.rank == 0:
                        self._on_signal(signum, origin)
                elif tag == TAG_ENDING:
                    self._quiet = True
                    return

    def _send(self, obj: object, dest: int, tag: int) -> None:
        with suppress(Exception):
            assert self.comm is not None
            self._sends.append(self.comm.isend(obj, dest=dest, tag=tag))
            self._sends = [r for r in self._sends if not r.Test()]

    def _probe(self, why: Why) -> Dict[int, Snapshot]:
        """{rank: its _snapshot()} of every rank that answers within the grace."""
        me = self.s.rank
        if self.comm is None or self.s.size == 1:
            return {me: self._snapshot()}
        self._probe_id += 1
        key = (me, self._probe_id)
        self._replies[key] = {me: self._snapshot()}
        with self._lock:
            for r in range(self.s.size):
                if r != me:
                    self._send((key, why), r, TAG_QUERY)
        end = time.monotonic() + self.grace
        while len(self._replies[key]) < self.s.size and time.monotonic() < end:
            time.sleep(BUSY_POLL)
            self._serve()
        return self._replies.pop(key)

    # ---- a deadline passed ----
    def _timeout(self) -> None:
        if self._joined:
            return
        self._joined = True
        snaps = self._probe("timeout")
        if self.comm is None and self.s.size > 1:
            lines = [f"no progress for {self.timeout:g} s at {self.where} on {self.s.where}; "
                     f"the other ranks could not be asked where they are (no side channel for "
                     f"the watchdog's thread)"]
        else:
            lines = describe_hang(snaps, self.s.size, self.s.hosts, self.timeout, self.grace)
        lines.append(self.abandon(f"timed out: {lines[0]}", TIMEOUT_CODE, rank0_alive=0 in snaps))
        if self.s.rank == min(snaps):
            self._end(lines, TIMEOUT_CODE)
        else:       # a lower rank answered and reports; end the job ourselves if it cannot
            self._deferred = (time.monotonic() + self.grace + 5, lines, TIMEOUT_CODE)

    # ---- SIGINT / SIGTERM ----
    def _alone_mpi(self) -> bool:
        """MPI without a channel of the watchdog's own (no MPI_THREAD_MULTIPLE), several ranks."""
        return self.comm is None and self.s.size > 1 and self.s.comm.kind == "mpi"

    def _on_signal(self, signum: int, origin: int) -> None:
        if self._quiet:
            return
        if self.s.rank != 0 and self._alone_mpi():
            # rank 0 cannot be told; end the job without a verdict of this rank's, as it may be
            # the launcher's kill after another rank's abort (and a failure here its news)
            self.abort(128 + signum)
            return
        # another rank is aborting the job, or a failed one will: the launcher's kill is part of it
        if self.failure is not None:
            return
        code = 128 + signum
        if self.signalled is not None:
            if origin == self.s.rank:
                self._end([], code)           # a second signal here: no more waiting
            return
        self.signalled = signum
        if self.s.rank == 0 or self.comm is None:
            self.stop_for(signum, origin)
        else:
            self._send((signum, self.s.rank), 0, TAG_NOTICE)
            self._deferred = (time.monotonic() + self.grace + 3,
                              [f"mpibench: {self.s.where} got {signal.Signals(signum).name}; rank 0 "
                               f"did not end the job, so this rank does"], code)

    def stop_for(self, signum: int, origin: int) -> None:
        """Rank 0 (or a lone rank): end the job for rank `origin`'s signal: closing line, results kept."""
        code = 128 + signum
        reason = (f"stopped by {signal.Signals(signum).name} on rank {origin} "
                  f"(host {self.s.hosts[origin]})")
        self.s.out(f"# {reason}: {self.abandon(reason, code)}")
        self._end([], code)

    def abandon(self, reason: str, code: int = 1, status: Optional[str] = None,
                rank0_alive: bool = True) -> str:
        """Rank 0: mark the results incomplete; what happened to them, in words."""
        if self.s.rank == 0 and self.on_fault is not None:
            return self.on_fault(reason, verdict.record(code, status))
        if self.s.rank == 0:
            return "no results file (none asked for)"
        if not rank0_alive:
            return ("rank 0 did not answer: its results file holds every row finished before "
                    "(\"complete\": false)")
        return "rank 0 keeps the results file"

    def _end(self, lines: List[str], code: int) -> None:
        if not self._ending.acquire(blocking=False):
            while True:                 # another thread of this rank is ending the job
                time.sleep(3600)
        for line in lines:
            verdict.note(line)
        verdict.say(code, getattr(self.s, "command", None))
        self.abort(code)

    def abort(self, code: int) -> None:
        """End the job with MPI_Abort, telling the other ranks first: one still polling MPI when
        this one dies reports Open MPI's "Socket closed" error (docs/exit-codes.md)."""
        if self.comm is not None:       # (not under self._lock: _serve may hold it here)
            for r in range(self.s.size):
                if r != self.s.rank:
                    self._send(None, r, TAG_ENDING)
            until = time.monotonic() + 1.0
            while self._sends and time.monotonic() < until:
                self._sends = [q for q in self._sends if not q.Test()]
                time.sleep(BUSY_POLL)
            self._quiet = True
        self.s.comm.abort(code)


def describe_hang(snaps: Mapping[int, Snapshot], size: int, hosts: Sequence[str], timeout: float,
                  grace: float) -> List[str]:
    """Lines naming the ranks that never arrived (from the answers in snaps)."""
    top = max(s[0] for s in snaps.values())
    (where, phase), _ = Counter((s[1], s[2]) for s in snaps.values() if s[0] == top).most_common(1)[0]
    at = f"{where} ({phase})" if phase else where
    silent = [r for r in range(size) if r not in snaps]
    behind = sorted(r for r, s in snaps.items() if s[0] < top)
    if not silent and not behind:
        return [f"no progress for {timeout:g} s at {at}: every rank arrived, the call itself "
                f"never completed (the backend or the network is stuck)"]
    missing = sorted(silent + behind)
    lines = [f"no progress for {timeout:g} s at {at}; "
             f"{len(missing)} rank{'s' if len(missing) != 1 else ''} never arrived:"]
    for r in missing[:16]:
        if r in snaps:
            s = snaps[r]
            lines.append(f"  rank {r} (host {s[3]}): alive but still at {s[1]}" +
                         (f" ({s[2]})" if s[2] else ""))
        else:
            lines.append(f"  rank {r} (host {hosts[r]}): no answer within {grace:g} s "
                         f"(stopped, dead, or stuck) in {where}")
    return lines + ([f"  ... and {len(missing) - 16} more"] if len(missing) > 16 else [])

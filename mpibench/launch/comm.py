"""The side channel every rank uses to gather figures, agree on errors and abort: MPI under
an MPI launcher, a torch Store under torchrun or a plain srun, nothing for a lone process.
It is never the channel being measured, so its cost is outside every timed region."""
import os
import pickle
import sys
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Callable, List, NoReturn, Optional, TypeVar

from . import faults

if TYPE_CHECKING:
    from torch.distributed import Store

T = TypeVar("T")     # whatever a rank sends: any object pickle takes


THREAD_LEVELS = {0: "MPI_THREAD_SINGLE", 1: "MPI_THREAD_FUNNELED", 2: "MPI_THREAD_SERIALIZED",
                 3: "MPI_THREAD_MULTIPLE"}      # MPI's order; mpi4py's constants hold these values

# How long rank 0 waits, when it ends a failed job last, for the other ranks' exits to reach
# the launcher: a launcher that sees one failed process, the last, adds no text of its own.
LAST_OUT = 1.0

# How long a rank waits for another rank's abort to reach it (a signal's end agreed, a lower
# failed rank reporting) before it leaves with the code itself.
ABORT_WAIT = 30.0


class Comm:
    kind = "self"
    barrier_kind = "none (one process)"    # what the timing barriers are, for the header
    threads = True                         # another thread may use it (MPI: THREAD_MULTIPLE)
    thread_level = ""
    rank = 0
    size = 1

    def allgather(self, obj: T) -> List[T]:
        gathered = self.gather(obj, root=self.rank)
        assert gathered is not None         # every rank is the root of its own
        return gathered

    def gather(self, obj: T, root: int = 0) -> Optional[List[T]]:
        return [obj]

    def bcast(self, obj: T, root: int = 0) -> T:
        return obj

    def barrier(self) -> None:
        pass

    def polite_barrier(self) -> None:
        """A barrier for ranks that may wait long: see MPIComm."""
        self.barrier()

    def abort(self, code: int) -> None:
        _hard_exit(code)

    def finish(self, code: int) -> int:
        """End a job every rank ended together with a non-zero code (see MPIComm)."""
        return code


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()


def _hard_exit(code: int) -> NoReturn:
    _flush()
    os._exit(code)


def mpi_library_version() -> str:
    """The MPI library's own version line; MPI allows asking before MPI_Init."""
    try:
        import mpi4py
        mpi4py.rc.initialize = False   # asking must not start MPI in a lone process
        from mpi4py import MPI
        # "Open MPI v5.0.11, package: ..., ident: ..." -> "Open MPI v5.0.11"
        # "MPICH Version:      5.0.2" -> "MPICH Version: 5.0.2"
        return " ".join(MPI.Get_library_version().strip().splitlines()[0].split(",")[0].split())
    except Exception as exc:          # no MPI library at all: say so, do not fail
        return f"unavailable ({type(exc).__name__})"


class MPIComm(Comm):
    kind = "mpi"
    barrier_kind = "MPI_Barrier"
    barrier: Callable[[], None]       # MPI_Barrier itself: the timing barriers call it directly

    def __init__(self) -> None:
        import mpi4py
        mpi4py.rc.thread_level = "multiple"   # the hang watchdog talks MPI from its own thread
        from mpi4py import MPI
        if not MPI.Is_initialized():
            MPI.Init_thread(MPI.THREAD_MULTIPLE)
        self.MPI, self.world = MPI, MPI.COMM_WORLD
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        # What MPI granted (Cray MPICH grants THREAD_MULTIPLE only with MPICH_MAX_THREAD_SAFETY
        # =multiple); below it the watchdog's thread must not call MPI (watchdog.py).
        # Test switch serialized:RANK: MPI granted THREAD_SERIALIZED.
        granted = (MPI.THREAD_SERIALIZED if faults.get("serialized", self.rank) is not None
                   else MPI.Query_thread())
        self.threads = granted >= MPI.THREAD_MULTIPLE
        self.thread_level = THREAD_LEVELS.get(granted, str(granted))
        self.barrier = self.world.Barrier

    def allgather(self, obj: T) -> List[T]:
        return self.world.allgather(obj)

    def gather(self, obj: T, root: int = 0) -> Optional[List[T]]:
        return self.world.gather(obj, root=root)

    def bcast(self, obj: T, root: int = 0) -> T:
        got: T = self.world.bcast(obj, root=root)
        return got

    def polite_barrier(self, spin: float = 0.002, nap: float = 0.0002) -> None:
        """A barrier that stops burning a core after `spin` seconds of waiting: MPI's
        busy-polling would take the CPU from ranks still measuring on the same host."""
        req = self.world.Ibarrier()
        until = time.perf_counter() + spin
        while not req.Test():
            if time.perf_counter() > until:
                time.sleep(nap)

    def abort(self, code: int) -> None:
        _flush()
        # Abort kills every process at once; give the launcher a moment to forward the
        # lines just written (the message naming the failed rank, the verdict line).
        time.sleep(1.0)
        self.world.Abort(code)

    def finish(self, code: int) -> int:
        """End a job that every rank ended together with a non-zero code, without the launcher's
        text: the other ranks finalize and exit 0 at once, rank 0 last with the code, which it
        returns (under Open MPI 4 rank 0 aborts). Why, as measured: docs/exit-codes.md."""
        self.world.Barrier()      # every rank has closed its watchdog and process group
        if mpi_library_version().startswith("Open MPI v4"):
            if self.rank == 0:
                self.abort(code)
            time.sleep(ABORT_WAIT)    # stopped by rank 0's abort; if not, leave with the code
            return code
        self.MPI.Finalize()
        if self.rank != 0:
            _hard_exit(0)
        if self.size > 1:
            time.sleep(LAST_OUT)
        _flush()
        return code


class StoreComm(Comm):
    """Gathers through a torch Store: set your key, read everyone's in one multi_get. Its barrier
    is a counter: the last rank to add one sets the key the others wait on (the store wakes every
    waiter at once) and deletes the previous barrier's keys, which every rank has left by then."""
    kind = "store"
    barrier_kind = "TCPStore counter (add, then wait for the last rank's key)"

    def __init__(self, store: "Store", rank: int, size: int) -> None:
        self.store, self.rank, self.size = store, rank, size
        self._seq = self._barriers = 0      # gathers and broadcasts, and barriers, so far

    def _next(self) -> str:
        self._seq += 1
        return f"mpibench/{self._seq}"

    def gather(self, obj: T, root: int = 0) -> Optional[List[T]]:
        tag = self._next()
        # torch's stub has str for Store.set's value; the store takes bytes as well
        self.store.set(f"{tag}/{self.rank}", pickle.dumps(obj))  # type: ignore[arg-type]
        if self.rank != root:
            return None
        return [pickle.loads(v) for v in self.store.multi_get([f"{tag}/{r}" for r in range(self.size)])]

    def bcast(self, obj: T, root: int = 0) -> T:
        tag = self._next()
        if self.rank == root:
            self.store.set(tag, pickle.dumps(obj))  # type: ignore[arg-type]  # bytes: see gather
            return obj
        got: T = pickle.loads(self.store.get(tag))
        return got

    def barrier(self) -> None:
        self._barriers += 1
        tag = f"mpibench-barrier/{self._barriers}"
        if self.store.add(tag, 1) < self.size:
            self.store.wait([tag + "/open"])
            return
        self.store.set(tag + "/open", b"1")  # type: ignore[arg-type]  # bytes: see gather
        if self._barriers > 1:
            before = f"mpibench-barrier/{self._barriers - 1}"
            self.store.delete_key(before)
            self.store.delete_key(before + "/open")

"""The Session every command runs in: this rank's place in the job, every rank's host and
address, the backend and device, the watchdog, and the two things every rank does alike
(rank 0 prints; errors are agreed)."""
import os
import socket
import sys
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Protocol, Tuple

from ..errors import Exit
from . import verdict
from .comm import Comm
from .launcher import Placement

if TYPE_CHECKING:
    import torch

    from .watchdog import Watchdog


class Results(Protocol):
    """Rank 0's results document as the launch stage sees it (results.output.RunOutput)."""
    def record_exit(self, verdict: Dict[str, Any]) -> None: ...


class Session:
    # set by bootstrap.start() before it returns the session
    local_rank: int
    local_size: int
    hosts: List[str]                  # hostname of every rank, in rank order
    addresses: List[Optional[str]]    # every rank's primary address (None where it has none)
    watch: "Watchdog"                 # the hang watchdog and signal handler (watchdog.py)

    def __init__(self, place: Placement, comm: Comm) -> None:
        self.launcher = place.launcher
        self.comm = comm
        self.rank, self.size = comm.rank, comm.size
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.backend: Optional[str] = None            # torch backend in use, or None
        self.device: Optional["torch.device"] = None  # torch.device for the torch backend
        self.pg = False
        self.rendezvous: Optional[str] = None         # "addr:port" (or how it was found)
        self.command: Optional[str] = None            # the command's name (for the verdict line)
        self.results: Optional[Results] = None        # rank 0: the command's results document, once opened
        self.rail: Optional[Tuple[int, str]] = None   # (index, interface): check --rails or MPIBENCH_RAILS

    @property
    def where(self) -> str:
        return f"rank {self.rank} (host {self.hostname})"

    def out(self, text: str = "") -> None:
        """Print on rank 0 only: results have one voice. A reader that left (`| head`)
        stops the printing, not the job: the results file still gets every row."""
        if self.rank == 0:
            try:
                verdict.out(text)
            except BrokenPipeError:
                quiet_stdout()

    def agree(self, error: Optional[object], code: int = 2) -> None:
        """Every rank passes its own error (or None); if any rank has one, all raise Exit with
        the first, naming where it happened unless every rank had it."""
        errors = self.comm.allgather(None if error is None else (self.rank, self.hostname, str(error)))
        bad = [e for e in errors if e is not None]
        if not bad:
            return
        rank, host, text = bad[0]
        if len(bad) == len(errors) and all(e[2] == text for e in bad):
            raise Exit(text, code)
        others = len(bad) - 1
        more = f" (and {others} more rank{'s' if others > 1 else ''})" if others else ""
        raise Exit(f"rank {rank} (host {host}): {text}{more}", code)

    def close(self) -> None:
        self.watch.close()
        if self.pg:
            import torch.distributed as dist
            with suppress(Exception):
                dist.destroy_process_group()
            self.pg = False


def quiet_stdout() -> None:
    """Send whatever stdout still has to print to /dev/null (its reader has gone)."""
    with suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)

"""The Session every command runs in: this rank's place in the job, every rank's host and
address, the backend and device, the watchdog, and the two things every rank does alike
(rank 0 prints; errors are agreed)."""
import os
import socket
import sys
from contextlib import suppress

from ..errors import Exit
from . import verdict


class Session:
    def __init__(self, place, comm):
        self.launcher = place.launcher
        self.comm = comm
        self.rank, self.size = comm.rank, comm.size
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.local_rank, self.local_size = place.local_rank, place.local_size
        self.hosts = None            # hostname of every rank, in rank order
        self.addresses = None        # every rank's primary address (None where it has none)
        self.backend = None          # torch backend in use, or None
        self.device = None           # torch.device for the torch backend
        self.pg = False
        self.rendezvous = None       # "addr:port" (or how it was found)
        self.watch = None            # the hang watchdog and signal handler (watchdog.py)
        self.command = None          # the command's name (for the verdict line)
        self.results = None          # rank 0: the command's results document, once opened
        self.rail = None             # (index, interface) under check --rails or MPIBENCH_RAILS

    @property
    def where(self):
        return f"rank {self.rank} (host {self.hostname})"

    def out(self, text=""):
        """Print on rank 0 only: results have one voice. A reader that left (`| head`)
        stops the printing, not the job: the results file still gets every row."""
        if self.rank == 0:
            try:
                verdict.out(text)
            except BrokenPipeError:
                quiet_stdout()

    def agree(self, error, code=2):
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

    def close(self):
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        if self.pg:
            import torch.distributed as dist
            with suppress(Exception):
                dist.destroy_process_group()
            self.pg = False


def quiet_stdout():
    """Send whatever stdout still has to print to /dev/null (its reader has gone)."""
    with suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)

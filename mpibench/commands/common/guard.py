"""The deadline every multi-rank command runs under (--timeout), and the verdict every rank
ends with. arm() gives the first deadline as soon as the job is up, so that no command waits
for the backend's own (much longer) timeout; each later step is session.watch.arm(where)."""
import argparse
from typing import Optional

from ...errors import CheckFailed
from ...launch.session import Session
from . import options

DEFAULT_TIMEOUT = 300.0


def add_timeout(parser: argparse.ArgumentParser, step: str, default: Optional[float] = DEFAULT_TIMEOUT,
                default_text: Optional[str] = None) -> None:
    """--timeout SECONDS, with the one meaning every command gives it."""
    default_text = default_text or f"{default:g} s"
    parser.add_argument("--timeout", type=options.positive_float, default=default, metavar="SECONDS",
                        help=f"the longest one step ({step}) may take before the job is called hung: "
                             f"the ranks that never arrived are named and every rank exits 124 "
                             f"(default {default_text}; the rendezvous gets the same)")


def arm(session: Session, timeout: float, where: str) -> None:
    """Start the command's first step under the watchdog (every rank)."""
    session.watch.timeout = timeout
    session.watch.arm(where)


def verdict(session: Session, failure: Optional[str]) -> int:
    """Every rank ends as rank 0 judged: exit 1 with rank 0's failure (None: passed), else 0."""
    failure = session.comm.bcast(failure, root=0)
    if failure:
        raise CheckFailed(failure)
    return 0

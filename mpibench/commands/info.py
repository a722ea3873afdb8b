"""mpibench info: who is where — one row per rank, versions per host."""
import argparse

from ..diagnose import rankfacts
from ..launch.session import Session
from ..results import preamble
from .common import guard, options

HELP = "show every rank's host, device, backend and launcher, and versions per host"


def add_arguments(p: argparse.ArgumentParser) -> None:
    options.add_backend(p, options.AUTO_AND_TORCH_BACKENDS)
    guard.add_timeout(p, "start-up, or gathering every rank's record", 120.0)


def execute(session: Session, args: argparse.Namespace) -> int:
    record = dict(rankfacts.rank_record(session), backend=session.backend, launcher=session.launcher)
    session.watch.arm("info: gathering every rank's record")
    gathered = session.comm.gather((record, rankfacts.versions()), root=0)
    session.watch.disarm()
    if session.rank == 0:
        assert gathered is not None
        preamble.info(session.out, rankfacts.world(session, session.backend), gathered)
    return 0

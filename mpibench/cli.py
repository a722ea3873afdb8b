"""Command line: parse on every rank alike, run the command, end every rank the same way.

A bad argument is found by every rank alike, before torch or MPI loads: rank 0 says it and
exits 2, the others exit 0 at once, so that the launcher returns rank 0's 2. An Exit raised on
all ranks ends the job cleanly with its code; any other exception is reported once, naming its
rank and host, and aborts the job so nothing hangs.
"""
import argparse
import os
import socket
import sys
import time
import traceback
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, List, NoReturn, Optional, Tuple

from . import __version__, commands
from .errors import Exit, UsageError
from .commands.common import guard, options
from .launch import bootstrap, launcher, verdict
from .launch.comm import ABORT_WAIT, LAST_OUT, Comm
from .launch.launcher import Placement
from .launch.session import Session, quiet_stdout
from .results.numbers import plural

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

_RANK0 = True   # set before parsing, so that help and usage print once per job


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")

    def parse_known_args(self, args: Optional[Iterable[str]] = None, namespace: Any = None
                         ) -> Tuple[Any, List[str]]:
        assert args is not None         # parse() passes argv on
        return super().parse_known_args(options.one_spelling(self, args), namespace)

    def _print_message(self, message: str,        # help, usage and --version
                       file: "Optional[SupportsWrite[str]]" = None) -> None:
        if _RANK0:
            super()._print_message(message, file)


EPILOG = """launch (one process per GPU; MPI only starts the processes):
  mpirun -np 16 --host n1:8,n2:8 python -m mpibench run -b 8 -e 4G --json run.json
  srun --mpi=pmix -N 2 --ntasks-per-node 8 python -m mpibench check
  torchrun --nproc_per_node 8 -m mpibench run        (or a lone python: one rank)

exit codes:
  0    done, every check passed
  1    a check failed (wrong results, below a threshold, failed hosts) or a rank failed
  2    bad input (one line says what), on every rank
  124  a hang: the watchdog named the ranks that never arrived and ended the job
  128+N  ended by signal N (130: Ctrl-C); results measured so far are kept in the files"""


def command_groups() -> str:
    """The top-level help's command list, by group (a command in no group: 'other')."""
    listed = {n for _, names in commands.GROUPS for n in names}
    groups = list(commands.GROUPS) + [("other", [n for n in commands.NAMES if n not in listed])]
    return "\n".join(line for title, names in groups if names for line in
                     [f"{title}:"] + [f"  {n:<10s}{commands.load(n).HELP}" for n in names])


def description(name: str, mod: ModuleType) -> str:
    """A command's -h text: what it does, how it exits where it says, and its page."""
    page = getattr(mod, "PAGE", f"docs/commands/{name}.md")
    return " ".join([f"{mod.HELP[0].upper()}{mod.HELP[1:]}.", getattr(mod, "EXITS", ""),
                     f"{page} says more."])


def build_parser() -> Parser:
    # no abbreviations: an option is named in full, so that no prefix of one command's option
    # stands for another option elsewhere (check --collective is not check --collectives)
    top = Parser(prog="mpibench", formatter_class=argparse.RawDescriptionHelpFormatter,
                 allow_abbrev=False,
                 description=(
        "Collective and network benchmarks for torch.distributed (NCCL on GPUs, gloo on CPUs), "
        "started by mpirun, srun, torchrun or a lone python. With no command, runs 'run'.\n\n"
        + command_groups()), epilog=EPILOG)
    top.add_argument("--version", action="version", version=f"mpibench {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser,
                             help="one of the commands above; COMMAND -h for its options")
    for name in commands.NAMES:
        mod = commands.load(name)
        p = sub.add_parser(name, description=description(name, mod), allow_abbrev=False)
        mod.add_arguments(p)
    return top


def parse(argv: Iterable[str]) -> Tuple[str, argparse.Namespace]:
    argv = list(argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, commands.DEFAULT)
    elif not argv[0].startswith("-") and argv[0] not in commands.NAMES:
        raise UsageError(f"unknown command '{argv[0]}' (commands: {', '.join(commands.NAMES)})")
    args = build_parser().parse_args(argv)
    # input errors that need no ranks: found alike everywhere, before torch loads
    getattr(commands.load(args.command), "check_args", lambda _: None)(args)
    return args.command, args


def main(argv: Optional[List[str]] = None) -> None:
    global _RANK0
    argv = sys.argv[1:] if argv is None else argv
    place = None
    try:
        place = launcher.detect(os.environ)     # no place: every rank says why
        _RANK0 = place.rank == 0
        name, args = parse(argv)
    except UsageError as exc:
        if not _RANK0:     # every rank fails alike: rank 0 says it, and exits last
            sys.exit(0)
        verdict.note(exc)
        first = next((a for a in argv if not a.startswith("-")), None)     # the command named
        verdict.say(exc.code, first if first in commands.NAMES else commands.DEFAULT)
        if place is not None and place.size != 1:
            time.sleep(LAST_OUT)
        sys.exit(exc.code)
    sys.exit(execute(place, name, args, argv))


def execute(place: Placement, name: str, args: argparse.Namespace,
            argv: Optional[List[str]] = None) -> int:
    """Runs command `name` on this rank; returns the exit code it leaves with."""
    mod = commands.load(name)
    session_kind = getattr(mod, "SESSION", "args")
    if session_kind == "offline":
        return _execute_offline(mod, args)
    session = comm = None
    try:
        backend = options.torch_backend(args.backend) if session_kind == "args" else None
        timeout = getattr(args, "timeout", None) or guard.DEFAULT_TIMEOUT
        link = bootstrap.connect(place)
        comm = link.comm       # held here: a failure before start() returns still aborts the job
        session = bootstrap.start(place, backend=backend, timeout=timeout, argv=argv, link=link,
                                  rails_spec=getattr(args, "rails", None))
        session.command = name
        guard.arm(session, timeout, f"{name}: start")
        code = mod.execute(session, args) or 0
        return end(session, comm, place, name, code)
    except Exit as exc:
        # Raised on every rank together: say it once and leave cleanly. The barrier keeps
        # the others from exiting before rank 0 has printed.
        if str(exc) and place.rank == 0:
            verdict.note(exc)
        if exc.code and comm is not None:
            comm.barrier()
        return end(session, comm, place, name, exc.code)
    except KeyboardInterrupt:       # during start-up, before the watchdog took the signals
        if place.rank == 0:
            verdict.note("mpibench: interrupted")
            verdict.say(130, name)
        if comm is not None and comm.size > 1:
            comm.abort(130)
        return 130
    except BaseException as exc:
        return _failed(exc, place, session, comm, name)
    finally:
        if session is not None:
            session.close()


def _execute_offline(mod: ModuleType, args: argparse.Namespace) -> int:
    """Runs a command that needs no ranks talking (no session); returns its exit code."""
    try:
        return mod.execute(None, args) or 0
    except Exit as exc:
        if str(exc):
            verdict.note(exc)
        return exc.code
    except BrokenPipeError:     # report ... | head: the reader has had enough
        quiet_stdout()
        return 0
    except KeyboardInterrupt:
        verdict.note("mpibench: interrupted")
        return 130


def _failed(exc: BaseException, place: Placement, session: Optional[Session], comm: Optional[Comm],
            name: str) -> int:
    """An exception on this rank alone: names the rank and host (and the ranks gone
    silent, the likely cause); the lowest failed rank records the verdict and aborts the
    job, once for the job however many ranks fail; returns 1."""
    where = session.where if session else f"rank {place.rank} (host {socket.gethostname()})"
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    watch = session.watch if session is not None else None
    first = watch.failure if watch is not None else None
    if first is not None:
        # another rank failed first and is ending the job: this error is most likely its news
        assert session is not None
        gone: List[int] = []
        reports = False
        said = (f"stopped, as rank {first[0]} (host {session.hosts[first[0]]}) failed first: "
                f"{detail}")
    else:
        gone, reports = watch.fail(f"{where} failed: {detail}") if watch else ([], True)
        said = f"failed: {detail}"
    if gone:   # a backend error here is most likely the news that another rank died
        assert session is not None
        said = (f"failed: {', '.join(f'rank {r} (host {session.hosts[r]})' for r in gone)} no "
                f"longer {plural(len(gone), 'answers', 'answer')} (dead or stopped); here: {detail}")
    verdict.note(f"mpibench: {where} {said}")
    if os.environ.get("MPIBENCH_DEBUG"):
        traceback.print_exc()       # still handling exc: its traceback
    if not reports:                 # a lower rank failed too, or one has reported: it ends the job
        time.sleep(ABORT_WAIT)
    verdict.say(1, name, "error")
    if comm is not None and comm.size > 1:
        (watch or comm).abort(1)
    return 1


def end(session: Optional[Session], comm: Optional[Comm], place: Placement, name: str, code: int) -> int:
    """End a command every rank finished together with `code`: rank 0 records and prints the
    verdict; a non-zero code in an MPI job ends with rank 0 exiting last (comm.finish), so
    that the launcher returns it and prints nothing."""
    watch = getattr(session, "watch", None)
    if watch is not None:
        # A signal that reached a rank near the end, before rank 0 could hear of it,
        # still ends the job as a signal: every rank says what it received.
        got: List[int] = comm.allgather(watch.signalled) if comm is not None else [watch.signalled]
        sent = [(signum, r) for r, signum in enumerate(got) if signum]
        if sent:
            if place.rank == 0:
                watch.stop_for(*sent[0])      # the closing line, the results kept, the abort
            time.sleep(ABORT_WAIT)
            return 128 + sent[0][0]
    if place.rank == 0:
        results = getattr(session, "results", None)
        if results is not None:
            results.record_exit(verdict.record(code))
        verdict.say(code, name)
    if not code or comm is None:
        return code
    if session is not None:
        session.close()
    return comm.finish(code)

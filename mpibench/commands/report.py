"""mpibench report: saved results rendered as the run printed them (no MPI, no ranks)."""
import argparse
from typing import cast

from ..launch import verdict
from ..results import exporters, reader
from ..results.schema import Doc
from .common import options

HELP = "print saved JSON results as tables (text, markdown or csv)"
SESSION = "offline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="results JSON files")
    p.add_argument("--format", choices=tuple(exporters.REPORT), default="text",
                   help="text (as run prints it, default), markdown or csv")
    options.add_log_options(p)


def execute(session: None, args: argparse.Namespace) -> int:
    docs = [(path, reader.pick_test(cast(Doc, reader.load(path, args.collective)), path, args.test))
            for path in args.files]                              # every file checked first
    verdict.write(exporters.REPORT[args.format](docs))
    return 0

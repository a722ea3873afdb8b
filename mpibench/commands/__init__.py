"""The command registry: name -> module.

Each command module defines HELP, add_arguments(parser) and execute(session, args); where
they differ from the default, SESSION (the process group of args.backend, default "args";
None: no process group; "offline": no ranks at all), EXITS (its exit codes, for -h) and
PAGE (its doc, docs/commands/NAME.md by default). A command may import every stage below,
never another command: what commands share is in common/.
"""
import importlib
from types import ModuleType

NAMES = ("run", "info", "allreduce", "latency", "flagsync", "demo", "p2p", "doctor",
         "report", "compare", "plot", "sweep", "predict", "train", "check", "verify")

DEFAULT = "run"

# The top-level help lists the commands in these groups.
GROUPS = (("measure", ("run", "p2p", "train", "sweep")),
          ("diagnose", ("check", "doctor", "info", "verify")),
          ("saved results", ("report", "compare", "plot", "predict")),
          ("classic tests", ("allreduce", "latency", "flagsync", "demo")))


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")

"""The command registry: name -> module.

Each command module defines HELP, add_arguments(parser), execute(session, args) and
SESSION: "args" (the process group of args.backend), None (no process group) or "offline"
(no ranks at all); EXITS (its exit codes, for -h) and PAGE (its doc, if not
docs/commands/NAME.md) where it has them. A command may import every stage below, never another command: what
commands share is in common/.
"""
import importlib

NAMES = ("run", "info", "allreduce", "latency", "flagsync", "demo", "p2p", "doctor",
         "report", "compare", "plot", "sweep", "predict", "train", "check", "verify")

DEFAULT = "run"

# The top-level help lists the commands in these groups.
GROUPS = (("measure", ("run", "p2p", "train", "sweep")),
          ("diagnose", ("check", "doctor", "info")),
          ("saved results", ("report", "compare", "plot", "predict")),
          ("classic tests", ("allreduce", "latency", "flagsync", "demo")))


def load(name):
    return importlib.import_module(f"{__name__}.{name}")

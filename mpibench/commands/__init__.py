"""The command registry: name -> module.

Each command module defines HELP, add_arguments(parser), execute(session, args) and
SESSION: the backend argument for bootstrap.start() — "args" to take args.backend,
None for no process group, or "offline" for commands that need no ranks at all.

Stage 6, commands: one module per command, on top of every stage below. A command never
imports another command: what two commands share lives in commands/common/ or in a stage
below. Only cli.py (the entry point) sits above.
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

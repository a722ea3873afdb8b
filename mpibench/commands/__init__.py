"""The command registry: name -> module.

Each command module defines HELP, add_arguments(parser), execute(session, args) and
SESSION: the backend argument for bootstrap.start() — "args" to take args.backend,
None for no process group, or "offline" for commands that need no ranks at all.
"""
import importlib

NAMES = ("run", "info", "allreduce", "latency", "flagsync", "demo", "p2p", "doctor",
         "report", "compare", "plot", "sweep", "predict", "train")

DEFAULT = "run"


def load(name):
    return importlib.import_module(f"{__name__}.{name}")

"""The job's last word: one line a script can read, and the same in the results file.

    mpibench-verdict: exit=1 status=failed command=check

Printed to stdout once per job, last, by the rank that ends it (docs/exit-codes.md). Every
line a rank prints goes through `out`, which drops what comes after the verdict: the
watchdog's thread can end the job (a signal, a hang) while the main thread still prints.
"""
import sys
import threading
from contextlib import suppress
from typing import Any, Dict, Optional

STATUS = {0: "ok", 1: "failed", 2: "usage", 124: "hang", 130: "interrupted", 143: "terminated"}
PREFIX = "mpibench-verdict:"


def record(code: int, status: Optional[str] = None) -> Dict[str, Any]:
    """The verdict as the results file holds it."""
    return {"code": code, "status": status or STATUS.get(code, "signal" if code > 128 else "failed")}


# Reentrant: a signal handler runs on the main thread, perhaps inside `out`.
_lock = threading.RLock()
_said = False


def out(text: str) -> None:
    """Write one line to stdout, unless this rank has said its verdict (then nothing)."""
    write(text + "\n")


def write(text: str) -> None:
    """Write text to stdout as it is, flushed, unless this rank has said its verdict."""
    with _lock:
        if not _said:
            sys.stdout.write(text)
            sys.stdout.flush()


def note(text: object) -> None:
    """One line to stderr, flushed, marked as mpibench's (progress notes and errors)."""
    text = str(text)
    err(text if text.startswith("mpibench") else f"mpibench: {text}")


def err(text: str) -> None:
    """Lines to stderr as they are, flushed (a trace's, a line a plugin must not read on stdout)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def said() -> bool:
    return _said


def say(code: int, command: Optional[str], status: Optional[str] = None) -> None:
    """Print the verdict line, once (a closed stdout is no error); after it nothing more."""
    say_in_place(f"{PREFIX} exit={code} status={record(code, status)['status']} command={command or '-'}")


def say_in_place(text: str) -> None:
    """Print text as the last line instead of the verdict line, for a program that reads one
    (SLURM's health check, node-problem-detector); the exit code and results carry the verdict."""
    global _said
    with _lock:
        if not _said:
            with suppress(OSError, ValueError):
                out(text)
            _said = True

"""The job's last word: one line a script can read, and the same in the results file.

    mpibench-verdict: exit=1 status=failed command=check

Printed to stdout by the rank that ends the job (rank 0, or the rank that reports a hang
or a failure), after everything else it prints. The status names the exit code's meaning.
"""
import sys

STATUS = {0: "ok", 1: "failed", 2: "usage", 124: "hang", 130: "interrupted", 143: "terminated"}
PREFIX = "mpibench-verdict:"


def status_of(code):
    return STATUS.get(code, "signal" if code > 128 else "failed")


def line(code, command, status=None):
    return f"{PREFIX} exit={code} status={status or status_of(code)} command={command or '-'}"


def record(code, status=None):
    """The verdict as the results file holds it."""
    return {"code": code, "status": status or status_of(code)}


def say(code, command, status=None):
    """Print the verdict line (a closed stdout is no error here)."""
    try:
        sys.stdout.write(line(code, command, status) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass

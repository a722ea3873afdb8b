"""Test-only fault switches, read from MPIBENCH_FAULT.

Comma-separated entries KIND:RANK[:ARG], e.g. "raise:1", "corrupt:2", "oom:1:64K".
Tests use them to prove that a fault on one rank is caught and named; nothing sets
them in normal use.
"""
import os


def _entries():
    spec = os.environ.get("MPIBENCH_FAULT", "")
    for item in spec.split(","):
        parts = item.strip().split(":", 2)
        if len(parts) >= 2 and parts[1].strip().isdigit():
            yield parts[0].strip(), int(parts[1]), (parts[2] if len(parts) == 3 else "")


def get(kind, rank):
    """The fault's argument ('' when it has none) if KIND is switched on for RANK, else None."""
    for k, r, arg in _entries():
        if k == kind and r == rank:
            return arg
    return None

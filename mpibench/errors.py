"""Exceptions that end a command with a known exit code: every rank raises them together
(after an agreement through the communicator), so they end the job cleanly; anything else
on one rank aborts the whole job."""
from typing import Optional


class Exit(Exception):
    """End the command on every rank with this code; rank 0 prints the message once."""
    code = 1

    def __init__(self, message: str = "", code: Optional[int] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(Exit):
    """Bad input: one line from rank 0, exit code 2 on every rank."""
    code = 2


class CheckFailed(Exit):
    """A correctness check found wrong elements (or a semantics check failed)."""

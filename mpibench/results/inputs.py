"""Input files of multi-rank commands, read on rank 0 only, the outcome agreed by all: a
path may exist only where the job was started (a login node's home, a local /tmp), and a
rank failing to read it alone would leave the others waiting."""
from typing import Callable, Optional, TypeVar, cast

from ..errors import UsageError
from ..launch import faults
from ..launch.session import Session

T = TypeVar("T")


def on_rank0(session: Session, path: str, load: Callable[[str], T], option: Optional[str] = None) -> T:
    """load(path) on rank 0 (UsageError for a bad file); its result, broadcast (it must pickle),
    or the same UsageError on every rank. Test switch MPIBENCH_FAULT=unreadable:RANK: RANK reads none."""
    value: Optional[T] = None
    error: Optional[str] = None
    if session.rank == 0:
        try:
            if faults.get("unreadable", session.rank) is not None:
                raise UsageError(f"cannot read {option + ' ' if option else ''}{path}: "
                                 f"Permission denied (test fault switch unreadable)")
            value = load(path)
        except UsageError as exc:
            error = str(exc)
    value, error = session.comm.bcast((value, error), root=0)
    if error:
        raise UsageError(error)
    return cast(T, value)       # load's result: rank 0 had no error

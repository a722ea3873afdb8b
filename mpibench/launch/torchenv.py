"""torch's own variables that change how a rank waits for NCCL and how it fails, read as torch
reads them (torch/csrc/distributed/c10d/Utils.hpp, getCvarBool and getCvarInt): a setting has
names in order of precedence and the first one set wins (torch parses them from the last to
the first, each overriding); a flag is 1, true, t, yes, y or 0, false, f, no, n in any case,
anything else an error of torch's at the process group's creation."""
from typing import Mapping, MutableMapping, Optional, Tuple

# ProcessGroupNCCL.hpp
BLOCKING_WAIT = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT")
ASYNC_ERROR_HANDLING = ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING")
TRUE = ("1", "true", "t", "yes", "y")
FALSE = ("0", "false", "f", "no", "n")


def first_set(names: Tuple[str, ...], environ: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(name, value) of the first of names set in environ, or None."""
    return next(((n, environ[n]) for n in names if n in environ), None)


def flag(names: Tuple[str, ...], environ: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(name, value) when the setting is on as torch reads it, else None (unset, off, or a
    value torch refuses)."""
    found = first_set(names, environ)
    return found if found is not None and found[1].lower() in TRUE else None


# ErrorHandlingMode (ProcessGroupNCCL.hpp): 2, CleanUpOnly, aborts the communicators on an NCCL
# error or timeout without ending the process; torch's default, 3 (SkipCleanUp), ends it with
# SIGABRT from its watchdog thread within about 100 ms, before mpibench can say what failed.
CLEAN_UP_ONLY = "2"


def keep_rank_on_nccl_errors(environ: MutableMapping[str, str]) -> bool:
    """Before an NCCL process group: unless the user chose a mode, ask torch to abort the
    communicators on an error and leave the process alive, so that the rank's next call raises
    and mpibench reports it as the job's one verdict. True when it set the variable."""
    if first_set(ASYNC_ERROR_HANDLING, environ) is not None:
        return False
    environ[ASYNC_ERROR_HANDLING[0]] = CLEAN_UP_ONLY
    return True

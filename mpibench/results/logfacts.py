"""What a printed nccl-tests log says beside its tables, for the checks that runs belong together:
the NCCL and nccl-tests versions it prints, the largest size its sweep asked for, whether its
`Avg bus bandwidth` trailer (the end of a finished run) is there."""
import re
from typing import Dict, NamedTuple, Optional

_NCCL = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_TESTS = re.compile(r"nccl-tests version (\S+)(?:.*nccl-library=(\d+))?")
_SWEEP = re.compile(r"maxBytes\s+(\d+)")
_REDUCED = re.compile(r"Reducing maxBytes to\s+(\d+)")
_TRAILER = re.compile(r"#\s*Avg bus bandwidth\s*:")


class Facts(NamedTuple):
    versions: Dict[str, str]        # {"NCCL": "2.21.5", "nccl-tests": "2.17.6"} where printed
    max_bytes: Optional[int]        # the first sweep's maxBytes (after nccl-tests reduced it)
    closed: bool                    # the trailer is there


def read(path: str) -> Optional[Facts]:
    """A printed log's facts; None for a JSON file (or one that cannot be read: the reader says why)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    if text.lstrip()[:1] in ("{", "["):
        return None
    versions = {}
    if m := _NCCL.search(text):
        versions["NCCL"] = m[1]
    if m := _TESTS.search(text):
        versions["nccl-tests"] = m[1]
        if m[2] and "NCCL" not in versions:      # 22807 -> 2.28.7
            code = int(m[2])
            versions["NCCL"] = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    top = None
    if m := _SWEEP.search(text):
        top = int(m[1])
        if (r := _REDUCED.search(text, m.end())):
            top = int(r[1])
    return Facts(versions, top, bool(_TRAILER.search(text)))

"""Byte sizes as users write them (8, 64K, 1M, 4G: K/M/G/T binary) and the sweep between two."""
import re
from typing import List, Optional, Union

from ..errors import UsageError

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
MAX_SIZES = 10000
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_BINARY = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def parse_size(text: Union[str, int], what: str = "size") -> int:
    """'64K' -> 65536. Whole numbers only: '1.5M', '4X', '-1' and '0' are errors."""
    if not (m := _SIZE.fullmatch(str(text).strip())):
        raise UsageError(f"{what} {text!r} is not a size: use bytes with an optional K, M, G or T "
                         f"suffix (binary), e.g. 8, 64K, 1M, 4G")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0:
        raise UsageError(f"{what} {text!r} must be at least 1 byte")
    return value


def format_size(n: int) -> str:
    """65536 -> '64 KiB' (exact units only, else bytes)."""
    for unit, scale in _BINARY:
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def format_bytes(n: int) -> str:
    """1610612736 -> '1.5 GiB': one decimal in the largest unit that is at least 1."""
    for unit, scale in _BINARY:
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def sweep(minbytes: int, maxbytes: int, stepfactor: float = 2, stepbytes: Optional[int] = None) -> List[int]:
    """The sizes from min to max, multiplying by stepfactor, or adding stepbytes when given."""
    if minbytes > maxbytes:
        raise UsageError(f"--minbytes {minbytes} is larger than --maxbytes {maxbytes}")
    if stepbytes is None and not stepfactor > 1:
        raise UsageError(f"--stepfactor {stepfactor} must be above 1 (or give --stepbytes)")
    sizes: List[int] = []
    size = minbytes
    while size <= maxbytes:
        if len(sizes) == MAX_SIZES:
            raise UsageError(f"more than {MAX_SIZES} sizes from {minbytes} to {maxbytes}: "
                             f"use a larger --stepbytes or --stepfactor")
        sizes.append(size)
        # a factor such as 1.5 must still move on from 1 byte
        size = size + stepbytes if stepbytes else max(int(size * stepfactor), size + 1)
    return sizes

"""Data types and reduction ops by the names users type, with the names nccl-tests prints."""
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from ..errors import UsageError


@dataclass(frozen=True)
class DType:
    name: str          # as typed, and torch's name: float32
    label: str         # as nccl-tests prints: float
    size: int          # bytes per element
    exact: int         # largest integer n such that every integer in [-n, n] is exact
    period: int        # modulus for position-sensitive check values (a prime below exact)
    signed: bool = True
    floating: bool = True


DTYPES = {d.name: d for d in (
    DType("float32", "float", 4, 1 << 24, 1048573),
    DType("float16", "half", 2, 2048, 2039),
    DType("bfloat16", "bfloat16", 2, 256, 251),
    DType("float64", "double", 8, 1 << 53, 1048573),
    DType("int32", "int32", 4, (1 << 31) - 1, 1048573, True, False),
    DType("int64", "int64", 8, (1 << 63) - 1, 1048573, True, False),
    DType("int8", "int8", 1, 127, 127, True, False),
    DType("uint8", "uint8", 1, 255, 251, False, False),
)}
ALIASES = {"float": "float32", "half": "float16", "double": "float64", "bf16": "bfloat16",
           "fp32": "float32", "fp16": "float16", "fp64": "float64", "int": "int32", "long": "int64"}

OPS = ("sum", "prod", "min", "max", "avg")


def parse_list(text: str, names: Sequence[str], what: str,
               aliases: Optional[Dict[str, str]] = None) -> List[str]:
    """'float32,half' or 'all' -> list of canonical names, in the order given."""
    aliases = aliases or {}
    items = [t.strip().lower() for t in str(text).split(",") if t.strip()]
    if items == ["all"]:
        return list(names)
    out: List[str] = []
    for item in items:
        name = aliases.get(item, item)
        if name not in names:
            raise UsageError(f"unknown {what} '{item}' (choose from {', '.join(names)}, or all)")
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError(f"no {what} given")
    return out


def parse_dtypes(text: str) -> List[DType]:
    return [DTYPES[n] for n in parse_list(text, list(DTYPES), "data type", ALIASES)]


def parse_ops(text: str) -> List[str]:
    return parse_list(text, OPS, "reduction op")

"""How text output writes a figure, an unknown one (None) as n/a (in a ratio column a dash);
nccl-tests' own column format is tables.fnum."""
from typing import Callable, Optional


def figure(value: Optional[float], spec: str = ".3f", unit: str = "", missing: str = "n/a") -> str:
    return missing if value is None else format(value, spec) + unit


def plural(n: Optional[int], word: str, many: Optional[str] = None) -> str:
    """word, or its plural (word + s unless many) when n is not 1."""
    return word if n == 1 else (many or word + "s")


def counted(n: Optional[int], word: str) -> str:
    """'1 rank', '3 ranks'."""
    return f"{n} {plural(n, word)}"


def ratio(value: Optional[float], missing: str = "-") -> str:
    """How many times another figure a figure is: 1.23x."""
    return figure(value, ".2f", "x", missing)


def _one_decimal(scale: float, unit: str = "") -> Callable[[Optional[float]], str]:
    return lambda value: figure(None if value is None else value * scale, ".1f", unit)


ms, us = _one_decimal(1e3), _one_decimal(1e6)      # from seconds
pct = _one_decimal(100, "%")                        # a share: 0.123 -> 12.3%


def share_text(gbps_figure: Optional[float], rate: Optional[float]) -> str:
    """' (NN%)': GB/s as a share of a line rate in Gbit/s ('' when either is unknown)."""
    return f" ({gbps_figure * 8 / rate:.0%})" if gbps_figure and rate else ""

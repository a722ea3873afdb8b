"""How text output writes a figure, an unknown one (None) as n/a (in a ratio column a dash);
nccl-tests' own column format is tables.fnum."""
from typing import Optional


def figure(value: Optional[float], spec: str = ".3f", unit: str = "", missing: str = "n/a") -> str:
    """format(value, spec) and its unit."""
    return missing if value is None else format(value, spec) + unit


def plural(n: Optional[int], word: str, many: Optional[str] = None) -> str:
    """word, or its plural (word + s unless many) when n is not 1."""
    return word if n == 1 else (many or word + "s")


def counted(n: Optional[int], word: str, many: Optional[str] = None) -> str:
    """'1 rank', '3 ranks'."""
    return f"{n} {plural(n, word, many)}"


def ratio(value: Optional[float], missing: str = "-") -> str:
    """How many times another figure a figure is: 1.23x."""
    return figure(value, ".2f", "x", missing)


def ms(seconds: Optional[float]) -> str:
    """Milliseconds, one decimal."""
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f}"


def us(seconds: Optional[float]) -> str:
    """Microseconds, one decimal."""
    return "n/a" if seconds is None else f"{seconds * 1e6:.1f}"


def pct(share: Optional[float]) -> str:
    """A share (0.123) as a percent with one decimal (12.3%)."""
    return "n/a" if share is None else f"{share * 100:.1f}%"


def share_text(gbps_figure: Optional[float], rate: Optional[float]) -> str:
    """' (NN%)': GB/s as a share of a line rate in Gbit/s ('' when either is unknown)."""
    return f" ({gbps_figure * 8 / rate:.0%})" if gbps_figure and rate else ""

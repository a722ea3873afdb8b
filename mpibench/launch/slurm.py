"""SLURM host lists, expanded without calling scontrol (it may not be on the compute node)."""
import re
from typing import Dict, List, Optional, Sequence

def _expand_range(spec: str) -> List[str]:
    out: List[str] = []
    for item in spec.split(","):
        if "-" in item:
            lo, hi = item.split("-", 1)
            out += [str(i).zfill(len(lo)) for i in range(int(lo), int(hi) + 1)]
        elif item:
            out.append(item)
    return out


def expand_nodelist(text: str) -> List[str]:
    """'h[1-3],gpu[01-02]x' -> ['h1', 'h2', 'h3', 'gpu01x', 'gpu02x']."""
    nodes: List[str] = []
    # the comma-separated parts; a comma inside brackets stays in its part
    for part in re.findall(r"(?:[^,\[]|\[[^\]]*\]?)+", text.strip()):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            nodes.append(part)
            continue
        prefix, spec, rest = m.groups()
        for mid in _expand_range(spec):
            nodes += [prefix + mid + tail for tail in (expand_nodelist(rest) if "[" in rest else [rest])]
    return nodes


def compress_hostlist(hosts: Sequence[str]) -> str:
    """The inverse of expand_nodelist: ['n03', 'n17', 'n18'] -> 'n[03,17-18]'; a range only where
    expanding it gives back the same spellings (zero padding included)."""
    groups: Dict[str, List[Optional[str]]] = {}
    for name in dict.fromkeys(hosts):
        m = re.fullmatch(r"(.*?)(\d+)", name)
        prefix, digits = m.groups() if m else (name, None)
        groups.setdefault(prefix, []).append(digits)
    parts = []
    for prefix, found in groups.items():
        if None in found:
            parts.append(prefix)
        numbers = [d for d in found if d is not None]
        if not numbers:
            continue
        if len(numbers) == 1:
            parts.append(prefix + numbers[0])
            continue
        spans: List[List[str]] = []
        for d in sorted(numbers, key=lambda d: (int(d), d)):
            # d extends the last span when it follows it, padded as the span's start
            if spans and int(d) == int(spans[-1][1]) + 1 and str(int(d)).zfill(len(spans[-1][0])) == d:
                spans[-1][1] = d
            else:
                spans.append([d, d])
        parts.append(prefix + "[" + ",".join(a if a == b else f"{a}-{b}" for a, b in spans) + "]")
    return ",".join(parts)

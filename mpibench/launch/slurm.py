"""SLURM host lists, expanded without calling scontrol (it may not be on the compute node)."""
import re

def _split_top(text):
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def _expand_range(spec):
    out = []
    for item in spec.split(","):
        if "-" in item:
            lo, hi = item.split("-", 1)
            width = len(lo)
            out += [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        elif item:
            out.append(item)
    return out


def expand_nodelist(text):
    """'h[1-3],gpu[01-02]x' -> ['h1', 'h2', 'h3', 'gpu01x', 'gpu02x']."""
    nodes = []
    for part in _split_top(text.strip()):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            nodes.append(part)
            continue
        prefix, spec, rest = m.groups()
        for mid in _expand_range(spec):
            nodes += [prefix + mid + tail for tail in (expand_nodelist(rest) if "[" in rest else [rest])]
    return nodes

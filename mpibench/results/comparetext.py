"""What compare prints: each file's description, the rows in common with their verdicts, the counts."""
from math import exp, log
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import UsageError
from ..launch import verdict
from ..measure.sizes import format_size
from . import numbers, reader, rows as rowkeys
from .reader import Bandwidth
from .schema import Doc
from .tables import commented, table

NOISE = 0.05
Key = Tuple[Any, ...]                   # rows.key()
Found = Tuple[Dict[Key, Bandwidth], List[Tuple[int, str]]]   # figures()


def judge(base: Bandwidth, other: Bandwidth, noise: float) -> Tuple[float, str]:
    """'faster' / 'slower' / 'within noise' for two reader.bandwidth() tuples."""
    ratio = other[0] / base[0]
    if base[1] != base[2] and other[1] != other[2]:      # both have a trials' range
        slower, faster = other[2] < base[1], other[1] > base[2]
    else:
        slower, faster = ratio < 1 - noise, ratio > 1 + noise
    return ratio, "slower" if slower else "faster" if faster else "within noise"


def figures(doc: Doc, modes: Sequence[str], min_size: int, by_backend: bool = True) -> Found:
    """({key: bandwidth}, [(size, mode)] printed as 0: not comparable, and said so)."""
    out, zero = {}, []
    for row in (r for r in doc["results"] if r["size"] >= min_size):
        for mode in modes:
            bw = reader.bandwidth(row, mode)
            if bw and bw[0] > 0:
                out[rowkeys.key(row, mode, by_backend)] = bw
            elif bw:
                zero.append((row["size"], mode))
    return out, zero


def nothing_in_common(paths: Sequence[str], docs: Sequence[Doc]) -> int:
    """0 when a file holds no measured rows at all (e.g. doctor's facts); else UsageError."""
    empty = [p for p, d in zip(paths, docs) if not d["results"]]
    if not empty:
        raise UsageError(f"no rows in common between {' and '.join(paths)} (rows line up by "
                         f"collective, backend, dtype, op, root, setting, size and mode)")
    preamble(paths, docs, [], [])           # each file's description
    verdict.out(f"# no measured rows in {', '.join(empty)}: nothing to compare")
    return 0


def preamble(paths: Sequence[str], docs: Sequence[Doc], notes: Sequence[str], found: Sequence[Found]) -> None:
    """Each file's description, the tests used, and the rows too slow to print."""
    for line in [reader.describe(p, d) for p, d in zip(paths, docs)] + list(notes):
        verdict.out(line)
    for p, (_, zero) in zip(paths, found):
        if sizes := sorted({s for s, _ in zero}):
            at = ", ".join(format_size(s) for s in sizes[:6])
            verdict.out(f"# {p}: {numbers.counted(len(zero), 'row-mode')} not compared: its bandwidth is "
                        f"printed as 0.00 (below 0.005 GB/s) at {at}"
                        + (f" and {len(sizes) - 6} more" if len(sizes) > 6 else ""))


def train_steps(paths: Sequence[str], docs: Sequence[Doc], min_share: Optional[float]) -> List[str]:
    """Print train results' throughput against the first file's; the files below min_share."""
    base = docs[0]["train"]["summary"]["tokens_per_s"]
    rows, failures = [], []
    for i, (path, doc) in enumerate(zip(paths, docs)):
        t, s, world = doc["train"], doc["train"]["summary"], doc.get("world") or {}
        share = s["tokens_per_s"] / base
        rows.append([path, t["model"]["preset"], t["parallel"], world.get("size", "?"),
                     len(world.get("hosts") or []), numbers.ms(s["step_s"]), f"{s['tokens_per_s']:.1f}",
                     numbers.pct(s.get("exposed_share")), numbers.pct(s.get("hidden_share")), f"{share:.3f}"])
        if i and min_share is not None and share < min_share:
            failures.append(f"{path}: train throughput at {share:.3f}x the baseline")
    verdict.out("# train: throughput against the first file")
    verdict.out("\n".join(commented(rows, ["file", "model", "parallel", "ranks", "hosts", "step ms",
                                           "tokens/s", "exposed", "hidden", "vs base"])))
    return failures


def rows(paths: Sequence[str], docs: Sequence[Doc], figs: Sequence[Dict[Key, Bandwidth]],
         common: Sequence[Key], noise: float, min_share: Optional[float]) -> List[str]:
    """Print the rows in common, each file's ratio, verdict and counts; return those below --min-share."""
    both_trials = all(any(reader.has_trials(r) for r in d["results"]) for d in docs)
    verdict.out("# noise: " + ("a difference counts when the trials' busbw ranges do not overlap"
                               if both_trials else
                               f"a ratio within 1 +- {noise:g} is within noise (no trials in "
                               f"every file; run --trials K for a measured spread)"))
    settings = any(k[5] for k in common)
    file_backends = "/".join(dict.fromkeys(d["results"][0].get("backend", "?")
                                           for d in docs if d["results"]))
    judged: List[List[Tuple[float, str]]] = [[] for _ in paths[1:]]    # (ratio, verdict) per file
    lines, failures = [], []
    for k in common:
        line, below_share = _row(k, paths, figs, noise, min_share, judged, settings, file_backends)
        lines.append(line)
        failures += below_share
    tags = [f" {i}" if len(paths) > 2 else "" for i in range(1, len(paths))]
    verdict.out(table(lines, ["collective", "backend", "type", "redop"] + (["setting"] if settings else [])
                      + ["size", "mode", "base GB/s"]
                      + [f"{h}{t}" for t in tags for h in ("GB/s", "ratio", "verdict")]))
    if any(figs[0][k][3] == "algbw" for k in common):
        verdict.out("# one-rank rows: algbw compared (busbw is not defined for one rank)")
    _totals(paths, figs, common, judged)
    return failures


def _totals(paths: Sequence[str], figs: Sequence[Dict[Key, Bandwidth]], common: Sequence[Key],
            judged: List[List[Tuple[float, str]]]) -> None:
    """Each file's verdicts and geometric mean ratio, and the rows not in every file."""
    for p, mine in zip(paths[1:], judged):
        words = [word for _, word in mine]
        geo = exp(sum(log(r) for r, _ in mine) / len(mine))
        verdict.out(f"# {p} vs {paths[0]}: {words.count('faster')} faster, {words.count('slower')} slower, "
                    f"{words.count('within noise')} within noise of {len(common)} rows; geometric mean ratio "
                    f"{geo:.3f}")
    for p, f in zip(paths, figs):
        if missing := len(set(f) - set(common)):
            verdict.out(f"# {numbers.counted(missing, 'row-mode')} of {p} not in every file: not compared")


def _row(k: Key, paths: Sequence[str], figs: Sequence[Dict[Key, Bandwidth]], noise: float,
         min_share: Optional[float], judged: List[List[Tuple[float, str]]], settings: bool,
         file_backends: str) -> Tuple[List[str], List[str]]:
    """One row's cells, each file's (ratio, verdict) added to judged; and its lines below --min-share."""
    coll, backend, dtype, redop, root, setting, size, mode = k
    base = figs[0][k]
    line = [coll, backend or file_backends, dtype, redop] + ([setting] if settings else []) + \
        [format_size(size), mode.replace("_", "-"), f"{base[0]:.4g}"]
    failures = []
    for i, f in enumerate(figs[1:]):
        ratio, word = judge(base, f[k], noise)
        judged[i].append((ratio, word))
        line += [f"{f[k][0]:.4g}", f"{ratio:.3f}", word]
        if min_share is not None and ratio < min_share:
            failures.append(f"{paths[i + 1]}: {coll} {dtype} {format_size(size)} "
                            f"{mode.replace('_', '-')} at {ratio:.3f}x the baseline")
    return line, failures


def below(failures: Sequence[str], min_share: float) -> None:
    for line in failures:
        verdict.out(f"# BELOW {min_share:g}x: {line}")

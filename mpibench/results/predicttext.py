"""What predict prints: its inputs and target, each collective's fit and table, the check's summary."""
import statistics
from math import exp
from typing import Any, List, Optional, Sequence, Set, Tuple

from ..launch import verdict
from ..measure.sizes import format_size
from .tables import table as plain

Checked = Tuple[str, int, float, Optional[bool]]   # collective, size, error, inside (None: a guess)


def header(described: Sequence[str], target: int, g: int, model: str, flat: Optional[str],
           far: Optional[Tuple[str, int]]) -> None:
    """The inputs, the target and model; far: (where, how many times the largest input)."""
    for line in described:
        verdict.out(line)
    verdict.out(f"# predicting {target} ranks ({target // g} nodes x {g}) with the {model} "
                f"model (docs/commands/predict.md)")
    if flat:
        verdict.out(f"# {flat}: every rank counted as a node of its own")
    if far:
        verdict.out(f"# {far[0]} is {far[1]}x the largest input: routing and "
                    f"congestion at that scale are not in the data")


def not_fitted(title: str) -> None:
    verdict.out(f"#\n# {title}: measured at one rank count only, not fitted")


def fit(title: str, points: int, ns: Sequence[int], errors: Sequence[float],
        described: Sequence[str]) -> None:
    rms = statistics.fmean(e * e for e in errors) ** 0.5
    verdict.out(f"#\n# {title}: fitted to {points} points at {', '.join(map(str, ns))} ranks; "
                f"fit error rms {rms:.1%}, max {max(map(abs, errors)):.1%}")
    for line in described:
        verdict.out(f"#   {line}")


def held_out(where: str, error: float, rows: int, ok: int, rms: float) -> None:
    verdict.out(f"# held out {where}: median |error| {error:.1%} over {rows} rows, predicted from the "
                f"smaller counts (their fit's rms {rms:.1%} in log), {ok} of {rows} inside their interval or "
                f"not predicted")


def unchecked(smaller: str, largest: str) -> None:
    verdict.out(f"# no held-out check: two counts ({smaller}, {largest}) cannot test their own trend, and a "
                f"change of regime beyond {largest} (a drop at the next switch tier) would not show in them; "
                f"give a third count or --topology")


def flat(smaller: str, largest: str, fall: float, limit: float, tier: float, doublings: float,
         target: str) -> None:
    """fall: the inputs' fall of the bus bandwidth per doubling (log); limit: below it they are
    flat; tier: the fall per doubling the slow side allows."""
    verdict.out(f"# flat inputs: from {smaller} to {largest} the bus bandwidth at sizes >= 1 MiB goes "
                f"x{exp(-fall):.3g} per doubling (above x{exp(-limit):.3g} is flat), which shows nothing of "
                f"how it falls beyond {largest}: each interval's slow side reaches its bus bandwidth at "
                f"x{exp(-tier):.3g} per doubling ({doublings:.3g} to {target}), the largest fall of the "
                f"published runs predict was calibrated on")


def regime(before: str, after: str, error: float, rms: float) -> None:
    verdict.out(f"# regime change between {before} and {after}: the held-out miss ({error:.1%}) is well "
                f"beyond the fit's residuals (rms {rms:.1%}): predicting from {after} alone (its bus "
                f"bandwidth held), with the interval that miss implies")


WHY = {
    "unseen": "a candidate NCCL chose at no input size within 4x (an exchange: bytes per peer two input "
              "counts did not run within 2x), a regime the inputs do not show",
    "disagree": "the fitted model, the trend over the inputs and the largest input's bus bandwidth "
                "held disagree there by more than x{limit:.3g}",
    "same pair": "sendrecv from two counts: each rank sends to one peer on one other node at every count, "
                 "which says nothing of the paths at more nodes (give three or more counts)",
    "flat": "flat inputs, and the fall they cannot rule out exceeds x{limit:.3g}",
    "tier": "the target needs a switch tier no input crossed (--topology)",
}


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], target: int, why: Set[str],
          limit: float) -> None:
    """limit: the models' disagreement (x) beyond which a row is not predicted."""
    verdict.out("\n".join("#   " + x for x in plain(rows, headers).splitlines()))
    for w in sorted(why):
        verdict.out(f"#   * not predicted at {target} ranks: {WHY[w].format(limit=limit)}; the figure is a "
                    f"guess, without an interval, and the check leaves it out")


def summary(results: List[Checked], target: int, files: str, large: int) -> None:
    """Per collective where there are several, then all: every size, then sizes >= large."""
    colls = sorted({r[0] for r in results})
    each = [(f"{c}: ", [r for r in results if r[0] == c]) for c in colls] if len(colls) > 1 else []
    for prefix, mine in each + [("", results)]:
        verdict.out("#")
        large_rows = [r for r in mine if r[1] >= large]
        for label, rows in (("", mine), (f", sizes >= {format_size(large)}", large_rows)):
            head = f"# {prefix}prediction vs measured at {target} ranks ({files}){label}: "
            guesses = sum(r[3] is None for r in rows)
            rows = [r for r in rows if r[3] is not None]
            if not rows:
                verdict.out(head + f"no rows predicted ({guesses} not, *)")
                continue
            worst, inside = max(rows, key=lambda r: abs(r[2])), sum(1 for r in rows if r[3])
            verdict.out(head + f"median |error| {statistics.median(abs(r[2]) for r in rows):.1%}, max "
                        f"{abs(worst[2]):.1%} ({worst[0]} {format_size(worst[1])}), {len(rows)} rows, "
                        f"{inside} of {len(rows)} inside the interval, {guesses} more not predicted (*)")

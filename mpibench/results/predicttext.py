"""What predict prints: its inputs and target, each collective's fit (its terms and a
table of predicted times, with the measured ones when given) and the errors against
them."""
import statistics

from tabulate import tabulate

from ..measure.sizes import format_size
from . import reader
from .numbers import us

MIB = 1 << 20


def intro(docs, target, g, model, flat, far):
    """far: how many times the largest input the target is, when far enough to warn."""
    for p, d in docs:
        print(reader.describe(p, d))
    print(f"# predicting {target} ranks ({target // g} nodes x {g}) with the {model} "
          f"model (see mpibench predict --help)")
    if flat:
        print(f"# {flat}: every rank counted as a node of its own")
    if far:
        where = f"{target} ranks" if flat else f"{target // g} nodes"
        print(f"# {where} is {int(far)}x the largest input: routing and "
              f"congestion at that scale are not in the data")


def unfitted(title):
    print(f"#\n# {title}: measured at one rank count only, not fitted")


def fitted(title, npts, ns, rms, errors, terms, rows, target, measured):
    """rows: (size, time at each n of ns or None, predicted time, interval low, high,
    busbw, candidate, whether it was ever the fastest measured, measured time or None)."""
    print(f"#\n# {title}: fitted to {npts} points at {', '.join(map(str, ns))} ranks; "
          f"fit error rms {rms:.1%}, max {max(abs(e) for e in errors):.1%}")
    for line in terms:
        print(f"#   {line}")
    headers = ["size"] + [f"t us n={n}" for n in ns] + [
        f"predicted t us n={target}", "interval us", f"busbw GB/s n={target}", "runs"]
    if measured:
        headers += [f"measured t us n={target}", "error", "inside"]
    cells = []
    for key, ts, t, lo, hi, bw, cand, seen, got in rows:
        row = [format_size(key)] + ["-" if x is None else us(x) for x in ts]
        row += [us(t), f"{us(lo)}-{us(hi)}", f"{bw:.4g}", cand + ("" if seen else " *")]
        if measured:
            row += ["-", "-", "-"] if got is None else [
                us(got), f"{t / got - 1:+.1%}", "yes" if lo <= got <= hi else "no"]
        cells.append(row)
    print("\n".join("#   " + x for x in tabulate(cells, headers=headers,
                                                 disable_numparse=True).splitlines()))
    if not all(r[7] for r in rows):
        print(f"#   * at {target} ranks the fastest fitted candidate is one that was never the "
              f"fastest at the measured counts: a regime the inputs do not show, so that "
              f"row's figure is a guess (its interval is the spread of fits)")


def summary(results, target, files, prefix):
    """The check's lines: all sizes, then sizes >= 1 MiB."""
    print("#")
    for label, rows in (("", results), (", sizes >= 1 MiB", [r for r in results if r[1] >= MIB])):
        head = f"# {prefix}prediction vs measured at {target} ranks ({files}){label}: "
        if not rows:
            print(head + "no rows")
            continue
        worst = max(rows, key=lambda r: abs(r[2]))
        inside = sum(1 for r in rows if r[3])
        print(head + f"median |error| {statistics.median(abs(r[2]) for r in rows):.1%}, max "
              f"{abs(worst[2]):.1%} ({worst[0]} {format_size(worst[1])}), {len(rows)} rows, "
              f"{inside} of {len(rows)} inside the interval")

#!/usr/bin/env python3
"""How far `mpibench predict` is from what real clusters measured: for every series of
shared/realworld/scaling (one cluster, software setup and collective), predict each node
count from every set of two or more smaller counts, as `predict` computes it
(analysis/extrapolate.py), and print per case the share of measured points inside their
interval or not predicted (*), the share predicted, the median half-width and |error| of
those predicted, and the flat (largest input's bus bandwidth held) and log-linear baselines
on the same rows, all at sizes >= 1 MiB; then the pooled figures, and the same with each
series scored under the constants the other series choose (bench/predict_calibrate.py).

    .venv/bin/python bench/predict_real.py [--data DIR] [--quick]

DIR defaults to ../shared/realworld/scaling beside the repository (or /work/shared/...).
--quick: the table without the leave-one-series-out line.
"""
import argparse
import sys

from predict_calibrate import PLACES, cases, data_dir, leave_one_series_out, line, score

from mpibench.analysis import bands

__all__ = ["data_dir", "table"]


def table(data, quick=False):
    """The table's lines: one row per case, then the pooled lines."""
    all_cases = cases(data)
    out = ["| dataset | collective | nodes | rows >= 1 MiB | inside or not predicted | predicted "
           "| median half-width | median error | flat | log-linear |", "|---" * 10 + "|"]
    for (dataset, coll, variant), inputs, target, rows in all_cases:
        if not rows:
            continue
        s = score(rows)
        cells = [f"{x:.1%}" if i > 1 and s[1] else ("-" if i > 1 else f"{x:.0%}") for i, x in enumerate(s)]
        out.append(f"| {dataset}{f' ({variant})' if variant else ''} | {coll} | "
                   f"{','.join(map(str, inputs))} -> {target} | {len(rows)} | " + " | ".join(cells) + " |")
    pooled = [x for *_, rs in all_cases for x in rs]
    out.append(line(f"{len(all_cases)} cases, {len(pooled)} rows pooled, constants {bands.CONSTS}",
                    score(pooled)))
    if not quick:
        out.append(line("leave one series out", score(leave_one_series_out(all_cases)[0])))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="the folder of series (default: see above)")
    p.add_argument("--quick", action="store_true", help="no leave-one-series-out line")
    args = p.parse_args()
    data = data_dir(args.data)
    if data is None:
        sys.exit(f"no data: none of {', '.join(map(str, PLACES))} exists (give --data DIR)")
    print("\n".join(table(data, args.quick)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Choose predict's interval constants (mpibench/analysis/bands.py) by held-out prediction:
every case of shared/realworld/scaling where a node count is predicted from two or more
smaller counts of the same series (one cluster, software setup and collective) is computed
once; then each set of constants on a grid is scored over all cases (leave one count out)
and, per series, with the constants chosen on the other series (leave one series out).
Scores count sizes >= 1 MiB, as the published table does.

    .venv/bin/python bench/predict_calibrate.py [--data DIR] [--current]

--current: only score the constants bands.py holds (no search).
"""
import argparse
import itertools
import sys
from math import log
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from predict_real import cases, data_dir  # noqa: E402

from mpibench.analysis import bands, extrapolate  # noqa: E402
from mpibench.commands.predict import points  # noqa: E402
from mpibench.results import reader  # noqa: E402

MIB = 1 << 20
GRID = {"widen": (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25),
        "spread": (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5),
        "decline": (0.5, 0.7, 1.0, 1.25, 1.5, 2.0, 3.0, 99.0)}
COVER, PREDICTED = 0.95, 0.70       # what a choice must reach; then the narrowest wins


def held_out_rows(data):
    """[(series, inputs, target, [(Row, measured seconds)])] of every case, sizes >= 1 MiB."""
    out = []
    for dataset, coll, variant, files, g in cases(data):
        docs = {n: reader.load(str(p), coll) for n, p in files.items()}
        counts = sorted(docs)
        for target in counts[2:]:
            below = [n for n in counts if n < target]
            for k in range(2, len(below) + 1):
                for inputs in itertools.combinations(below, k):
                    out.append(((dataset, coll, variant), inputs, target,
                                _case(coll, [(str(files[n]), docs[n]) for n in inputs],
                                      (str(files[target]), docs[target]), target * g, g)))
    return out


def _case(coll, named, check, target, g):
    pts = points(named, None, {coll}, None)
    meas = points([check], None, {coll}, g)
    got = []
    for key, p in pts.items():
        mine = meas.get(key)
        if not mine:
            continue
        keys = sorted({k for n, _, k, _, _ in p if n == min(x[0] for x in p)})
        by_key = {extrapolate.match(size, n, keys): (s, t) for n, _, size, s, t in mine}
        res = extrapolate.group("nccl", key[0], key[1], key[2], p, target, g, sorted(by_key),
                                {k: v[0] for k, v in by_key.items()})
        got += [(r, by_key[r.key][1]) for r in res.rows if r.key >= MIB]
    return got


def score(rows, consts=None):
    """(share inside or declined, share predicted, median half-width, median |error|) of predicted
    rows; consts: rescored with these first."""
    scored = [(extrapolate.rescore(r, consts), m) for r, m in rows] if consts else rows
    done = [(r, m) for r, m in scored if r.why is None]
    ok = sum(1 for r, m in scored if r.why is not None or r.lo <= m <= r.hi)
    return (ok / len(scored), len(done) / len(scored),
            bands.median([bands.half_width(r.lo, r.hi, r.t) for r, _ in done]),
            bands.median([abs(r.t / m - 1) for r, m in done]))


def baselines(rows, consts=None):
    """Median |error| of the flat baseline (the largest input's bus bandwidth held) and the
    log-linear trend on the rows predicted, and of all rows."""
    rows = [(extrapolate.rescore(r, consts), m) for r, m in rows] if consts else rows
    done = [(r, m) for r, m in rows if r.why is None]
    return [bands.median([abs(getattr(r, k) / m - 1) for r, m in which if getattr(r, k)])
            for which in (done, rows) for k in ("flat", "trend")]


def choose(rows):
    best = None
    for consts in itertools.product(*GRID.values()):
        cover, share, width, _ = score(rows, consts)
        if cover >= COVER and share >= PREDICTED and (best is None or width < best[1]):
            best = (consts, width)
    return best[0] if best else bands.CONSTS


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None)
    p.add_argument("--current", action="store_true")
    args = p.parse_args()
    data = data_dir(args.data)
    if data is None:
        sys.exit("no data (give --data DIR)")
    cases_ = held_out_rows(data)
    pooled = [x for *_, rs in cases_ for x in rs]
    print(f"# {len(cases_)} held-out cases, {len(pooled)} rows >= 1 MiB")
    for series, inputs, target, rs in cases_:
        if rs:
            c = score(rs, bands.CONSTS)
            print(f"# {'/'.join(x for x in series if x)} {','.join(map(str, inputs))} -> {target}: "
                  f"{c[0]:.0%} inside or declined, {c[1]:.0%} predicted, half-width {c[2]:.1%}, "
                  f"|error| {c[3]:.1%} ({len(rs)} rows)")
    cur, base = score(pooled, bands.CONSTS), baselines(pooled, bands.CONSTS)
    print(f"# bands.py's constants {bands.CONSTS}: {cur[0]:.0%} inside or declined, {cur[1]:.0%} "
          f"predicted, median half-width {cur[2]:.1%}, median |error| {cur[3]:.1%}; on the rows "
          f"predicted flat {base[0]:.1%}, log-linear {base[1]:.1%} (on every row: {base[2]:.1%}, {base[3]:.1%})")
    if args.current:
        return
    chosen = choose(pooled)
    c = score(pooled, chosen)
    print(f"# chosen over all cases {chosen}: {c[0]:.0%}, {c[1]:.0%}, {c[2]:.1%}, {c[3]:.1%}")
    series = sorted({s for s, *_ in cases_})
    out = []
    for s in series:
        train = [x for ss, *_, rs in cases_ if ss != s for x in rs]
        test = [x for ss, *_, rs in cases_ if ss == s for x in rs]
        if test:
            consts = choose(train)
            out += [(extrapolate.rescore(r, consts), m) for r, m in test]
    if out:
        c = score(out)
        print(f"# leave one series out: {c[0]:.0%} inside or declined, {c[1]:.0%} predicted, "
              f"half-width {c[2]:.1%}, |error| {c[3]:.1%}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Choose predict's interval constants (mpibench/analysis/bands.py) by held-out prediction:
every case of shared/realworld/scaling where a node count of a series (one cluster, software
setup and collective: one folder) is predicted from two or more of its smaller counts is
computed once, as `mpibench predict` computes it (analysis/extrapolate.py); then every set
of constants on a grid is scored over all cases pooled (each held-out count left out of the
fit: leave one count out) and, series by series, with the constants the other series choose
(leave one series out). Scores count sizes >= 1 MiB, as the published table does. A choice
must hold COVER of the measured points inside their interval or declined (*) and predict
PREDICTED of the rows; of those, the narrowest median interval wins.

    .venv/bin/python bench/predict_calibrate.py [--data DIR] [--quick]

--quick: only score the constants bands.py holds (no search).
"""
import argparse
import itertools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mpibench.analysis import bands, extrapolate  # noqa: E402
from mpibench.commands.predict import points  # noqa: E402
from mpibench.results import reader  # noqa: E402

PLACES = [ROOT.parent / "shared" / "realworld" / "scaling", Path("/work/shared/realworld/scaling")]
NAME = re.compile(r"N(\d+)_G(\d+)_([a-z_]+?)(?:__(\w+))?\.txt$")
LOGNAME = {"alltoall": "all_to_all"}       # the log's *_perf name -> mpibench's
MIB = 1 << 20
GRID = {"widen": (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25),
        "spread": (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5),
        "decline": (0.5, 0.7, 1.0, 1.25, 1.5, 2.0, 3.0, 99.0)}
COVER, PREDICTED = 0.95, 0.74


def data_dir(given=None):
    for p in [Path(given)] if given else PLACES:
        if p.is_dir():
            return p
    return None


def series(data):
    """[(dataset, collective, variant, {nodes: path}, gpus per node)] of every folder."""
    out = {}
    for path in sorted(data.rglob("N*_G*_*.txt")):
        m = NAME.search(path.name)
        if not m:
            continue
        key = (str(path.parent.relative_to(data)), LOGNAME.get(m[3], m[3]), m[4] or "")
        out.setdefault(key, ({}, int(m[2])))[0][int(m[1])] = path
    return [(d, c, v, files, g) for (d, c, v), (files, g) in out.items()]


def cases(data):
    """[(series, inputs, target, [(Row, measured seconds)] at sizes >= 1 MiB)] of every case."""
    out = []
    for dataset, coll, variant, files, g in series(data):
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


def falls(data):
    """[(fall per doubling, series, smaller, larger count)] of the bus bandwidth between successive
    counts of every series, as predict takes it (extrapolate.fall): the largest is bands.TIER."""
    out = []
    for dataset, coll, variant, files, g in series(data):
        named = [(str(p), reader.load(str(p), coll)) for p in files.values()]
        for pts in points(named, None, {coll}, None).values():
            tab, ns = extrapolate.table(pts), sorted({n for n, *_ in pts})
            for a, b in zip(ns, ns[1:]):
                if (got := extrapolate.fall(coll, tab, a, b)) is not None:
                    out.append((got, (dataset, coll, variant), a // g, b // g))
    return sorted(out)


def _case(coll, named, check, target, g):
    got = []
    measured = points([check], None, {coll}, g)
    for key, pts in points(named, None, {coll}, None).items():
        if key not in measured:
            continue
        keys = sorted({k for n, _, k, _, _ in pts if n == min(x[0] for x in pts)})
        by_key = {extrapolate.match(size, n, keys): (s, t) for n, _, size, s, t in measured[key]}
        res = extrapolate.group("nccl", key[0], key[1], key[2], pts, target, g, sorted(by_key),
                                {k: v[0] for k, v in by_key.items()})
        got += [(r, by_key[r.key][1]) for r in res.rows if r.key >= MIB]
    return got


def score(rows, consts=None):
    """(share inside or declined, share predicted, median half-width, median |error| of the rows
    predicted, flat's and log-linear's median |error| on those rows); consts: rescored first."""
    rows = [(extrapolate.rescore(r, consts), m) for r, m in rows] if consts else rows
    done = [(r, m) for r, m in rows if r.why is None]
    ok = sum(1 for r, m in rows if r.why is not None or r.lo <= m <= r.hi)

    def err(k):
        return bands.median([abs(getattr(r, k) / m - 1) for r, m in done if getattr(r, k)])
    return (ok / len(rows), len(done) / len(rows),
            bands.median([bands.half_width(r.lo, r.hi, r.t) for r, _ in done]), err("t"), err("flat"),
            err("trend"))


def choose(rows):
    best = None
    for consts in itertools.product(*GRID.values()):
        cover, share, width, *_ = score(rows, consts)
        if cover >= COVER and share >= PREDICTED and (best is None or width < best[1]):
            best = (consts, width)
    return best[0] if best else bands.CONSTS


def line(label, s):
    return (f"# {label}: {s[0]:.0%} inside or not predicted, {s[1]:.0%} predicted, median half-width "
            f"{s[2]:.1%}, median |error| {s[3]:.1%}; on the same rows flat {s[4]:.1%}, log-linear {s[5]:.1%}")


def leave_one_series_out(all_cases):
    """Each series' rows under the constants the other series choose: (rows, {series: constants})."""
    out, chosen = [], {}
    for s in sorted({c[0] for c in all_cases}):
        test = [x for ss, *_, rs in all_cases if ss == s for x in rs]
        if test:
            chosen[s] = choose([x for ss, *_, rs in all_cases if ss != s for x in rs])
            out += [(extrapolate.rescore(r, chosen[s]), m) for r, m in test]
    return out, chosen


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None)
    p.add_argument("--quick", action="store_true", help="score bands.py's constants only")
    args = p.parse_args()
    data = data_dir(args.data)
    if data is None:
        sys.exit(f"no data: none of {', '.join(map(str, PLACES))} exists (give --data DIR)")
    all_cases = cases(data)
    pooled = [x for *_, rs in all_cases for x in rs]
    print(f"# {len(all_cases)} held-out cases, {len(pooled)} rows >= 1 MiB")
    print(line(f"bands.py's constants {bands.CONSTS}", score(pooled, bands.CONSTS)))
    top = falls(data)[-1]
    print(f"# largest fall of the bus bandwidth per doubling between successive counts: {top[0]:.2f} "
          f"({'/'.join(x for x in top[1] if x)}, {top[2]} to {top[3]} nodes; bands.TIER {bands.TIER})")
    if args.quick:
        return
    best = choose(pooled)
    print(line(f"chosen over every case {best}", score(pooled, best)))
    rows, chosen = leave_one_series_out(all_cases)
    for s, c in chosen.items():
        print(f"#   without {'/'.join(x for x in s if x)}: {c}")
    print(line("leave one series out", score(rows)))


if __name__ == "__main__":
    main()

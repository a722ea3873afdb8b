"""mpibench compare: line up the rows of saved results and say what changed."""
from math import exp, log

from tabulate import tabulate

from ..errors import CheckFailed, UsageError
from ..measure.sizes import format_size
from ..results import reader, rows, traintext
from .common import options

HELP = "compare saved results row by row against the first file (the baseline)"
DESCRIPTION = (
    "Lines up rows by collective, backend, dtype, op, root, sweep setting, size and mode; "
    "prints each file's busbw (algbw where busbw is not defined, one rank) and its ratio to "
    "the baseline (the first file), and says faster, slower or within noise. Noise: when "
    "both rows have trials (run --trials), a difference counts only when their min-max "
    "busbw ranges do not overlap; otherwise when the ratio is outside 1 +- --noise. "
    "With --min-share F, exits 1 when any row is below F times the baseline (for CI).")
SESSION = "offline"
NOISE = 0.05


def add_arguments(p):
    p.add_argument("baseline", metavar="BASE.json", help="the reference results")
    p.add_argument("others", nargs="+", metavar="FILE.json", help="results to compare with it")
    p.add_argument("--noise", type=options.positive_float, default=NOISE, metavar="X",
                   help=f"without trials: a ratio within 1 +- X is noise (default {NOISE:g})")
    options.add_min_share(p, "exit 1 when any row's busbw is", "the baseline's", None)
    p.add_argument("--min-size", type=options.size_arg, default=0, metavar="SIZE",
                   help="compare only rows of at least SIZE bytes (small sizes are latency noise)")
    p.add_argument("--mode", choices=("both", "out", "in"), default="both",
                   help="out-of-place, in-place or both (default both)")
    options.add_log_options(p)


def verdict(base, other, noise):
    """'faster' / 'slower' / 'within noise' for two reader.bandwidth() tuples."""
    ratio = other[0] / base[0]
    if base[1] != base[2] and other[1] != other[2]:      # both have a trials' range
        if other[2] < base[1]:
            return ratio, "slower"
        if other[1] > base[2]:
            return ratio, "faster"
        return ratio, "within noise"
    if ratio < 1 - noise:
        return ratio, "slower"
    if ratio > 1 + noise:
        return ratio, "faster"
    return ratio, "within noise"


def figures(doc, modes, min_size, by_backend=True):
    """({key: bandwidth}, [(size, mode)] of row-modes whose printed figure is 0: not
    comparable, and said so)."""
    out, zero = {}, []
    for row in doc["results"]:
        if row["size"] < min_size:
            continue
        for mode in modes:
            bw = reader.bandwidth(row, mode)
            if bw and bw[0] > 0:
                out[rows.key(row, mode, by_backend)] = bw
            elif bw:
                zero.append((row["size"], mode))
    return out, zero


def _sizes(pairs):
    sizes = sorted({s for s, _ in pairs})
    text = ", ".join(format_size(s) for s in sizes[:6])
    return text + (f" and {len(sizes) - 6} more" if len(sizes) > 6 else "")


def load(paths, args):
    """The documents, each narrowed to one test where a log holds repeats (--test N, else
    the first of each repeated collective), and the lines saying which test is used."""
    docs, notes = [], []
    for p in paths:
        whole = reader.load(p, args.collective)
        doc = reader.pick_test(whole, p, args.test)
        if args.test is not None and len(reader.tests(whole)) > 1:
            notes.append(f"# {p}: test {args.test} ({doc['tests'][0]['collective']}, line "
                         f"{doc['tests'][0]['line']})")
        elif args.test is None:
            doc, note = reader.first_of_each(doc, p)
            notes += [note] if note else []
        docs.append(doc)
    return docs, notes


def execute(session, args):
    paths = [args.baseline] + args.others
    docs, notes = load(paths, args)
    modes = reader.modes(args.mode)
    # one backend per file: the backend is the file's, and rows of two files line up
    # whatever it is (nccl-tests' log against mpibench on gloo)
    by_backend = any(len({r.get("backend") for r in d["results"]}) > 1 for d in docs)
    found = [figures(d, modes, args.min_size, by_backend) for d in docs]
    figs = [f for f, _ in found]
    common = [k for k in figs[0] if all(k in f for f in figs[1:])]
    trained = all((d.get("train") or {}).get("summary") for d in docs)
    if not common and not trained:
        return _nothing_in_common(paths, docs)
    _preamble(paths, docs, notes, found)
    failures = []
    if trained:     # train results: the steps first, then any collective rows they share
        failures += _train_steps(paths, docs, args.min_share)
        if not common:
            return _verdict(failures, args.min_share, paths[0])
    failures += _rows(paths, docs, figs, common, args)
    return _verdict(failures, args.min_share, paths[0])


def _nothing_in_common(paths, docs):
    """0 when a file holds no measured rows at all (e.g. doctor's facts); else UsageError."""
    empty = [p for p, d in zip(paths, docs) if not d["results"]]
    if not empty:
        raise UsageError(f"no rows in common between {' and '.join(paths)} (rows line up by "
                         f"collective, backend, dtype, op, root, setting, size and mode)")
    for p, d in zip(paths, docs):
        print(reader.describe(p, d))
    print(f"# no measured rows in {', '.join(empty)}: nothing to compare")
    return 0


def _preamble(paths, docs, notes, found):
    """Each file's description, the tests used, and the rows too slow to print."""
    for p, d in zip(paths, docs):
        print(reader.describe(p, d))
    for line in notes:
        print(line)
    for p, (_, zero) in zip(paths, found):
        if zero:
            print(f"# {p}: {len(zero)} row-mode{'s' if len(zero) != 1 else ''} not compared: "
                  f"its bandwidth is printed as 0.00 (below 0.005 GB/s) at {_sizes(zero)}")


def _train_steps(paths, docs, min_share):
    """Print train results' steps side by side; the files whose throughput fails."""
    lines, speed = traintext.comparison(list(zip(paths, docs)))
    print("\n".join(lines))
    return [f"{p}: train throughput at {r:.3f}x the baseline"
            for p, r in zip(paths[1:], speed) if min_share is not None and r < min_share]


def _rows(paths, docs, figs, common, args):
    """Print the rows in common with each file's ratio and verdict, then each file's
    counts; the rows below --min-share."""
    both_trials = all(any(reader.has_trials(r) for r in d["results"]) for d in docs)
    print("# noise: " + ("a difference counts when the trials' busbw ranges do not overlap"
                         if both_trials else
                         f"a ratio within 1 +- {args.noise:g} is within noise (no trials in "
                         f"every file; run --trials K for a measured spread)"))
    settings = any(k[5] for k in common)
    file_backends = "/".join(dict.fromkeys(d["results"][0].get("backend", "?")
                                           for d in docs if d["results"]))
    rows, ratios, failures = [], [[] for _ in paths[1:]], []
    counts = [{"faster": 0, "slower": 0, "within noise": 0} for _ in paths[1:]]
    algbw_used = False
    for k in common:
        coll, backend, dtype, redop, root, setting, size, mode = k
        base = figs[0][k]
        algbw_used |= base[3] == "algbw"
        line = [coll, backend or file_backends, dtype, redop] + ([setting] if settings else []) + \
            [format_size(size), mode.replace("_", "-"), f"{base[0]:.4g}"]
        for i, f in enumerate(figs[1:]):
            ratio, word = verdict(base, f[k], args.noise)
            counts[i][word] += 1
            ratios[i].append(ratio)
            line += [f"{f[k][0]:.4g}", f"{ratio:.3f}", word]
            if args.min_share is not None and ratio < args.min_share:
                failures.append(f"{paths[i + 1]}: {coll} {dtype} {format_size(size)} "
                                f"{mode.replace('_', '-')} at {ratio:.3f}x the baseline")
        rows.append(line)
    print(tabulate(rows, headers=_headers(len(paths), settings), disable_numparse=True))
    if algbw_used:
        print("# one-rank rows: algbw compared (busbw is not defined for one rank)")
    _counts(paths, figs, common, counts, ratios)
    return failures


def _headers(files, settings):
    headers = ["collective", "backend", "type", "redop"] + (["setting"] if settings else []) + \
        ["size", "mode", "base GB/s"]
    for i in range(1, files):
        tag = f" {i}" if files > 2 else ""
        headers += [f"GB/s{tag}", f"ratio{tag}", f"verdict{tag}"]
    return headers


def _counts(paths, figs, common, counts, ratios):
    """Each file's faster / slower / within-noise counts and geometric mean ratio, and the
    rows not in every file."""
    for i, p in enumerate(paths[1:]):
        c = counts[i]
        geo = exp(sum(log(r) for r in ratios[i]) / len(ratios[i]))
        print(f"# {p} vs {paths[0]}: {c['faster']} faster, {c['slower']} slower, "
              f"{c['within noise']} within noise of {len(common)} rows; geometric mean ratio "
              f"{geo:.3f}")
    for p, f in zip(paths, figs):
        missing = len(set(f) - set(common))
        if missing:
            print(f"# {missing} row-mode{'s' if missing != 1 else ''} of {p} not in every file: "
                  f"not compared")


def _verdict(failures, min_share, base):
    if failures:
        for line in failures:
            print(f"# BELOW {min_share:g}x: {line}")
        raise CheckFailed(f"{len(failures)} row{'s' if len(failures) != 1 else ''} below "
                          f"{min_share:g} x the baseline ({base})")
    return 0

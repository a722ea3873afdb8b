"""mpibench predict: fit latency and bandwidth terms to runs at several host counts and
predict a larger one (models in mpibench/scaling.py)."""
from tabulate import tabulate

from ..analysis import scaling
from ..errors import UsageError
from ..measure.collectives import REGISTRY
from ..measure.sizes import format_size
from ..results import reader
from ..results.numbers import us
from .common import options

HELP = "fit each collective's latency and bandwidth terms to runs at several host counts; predict more"
DESCRIPTION = (
    "Reads results of the same sweep at two or more rank counts, fits per collective "
    "t = alpha*f(n) + beta*g(n)*S (ring: f grows linearly with ranks, tree: with log2; g "
    "is the share of S each rank sends), prints alpha, 1/beta and the fit's error on the "
    "measured points, then the predicted time and busbw per size at --hosts H (ranks = H "
    "x the ranks per host of the inputs) or --ranks N. With --check FILE (a run at that "
    "count) it also prints the prediction's error.")
SESSION = "offline"


def add_arguments(p):
    p.add_argument("files", nargs="+", metavar="FILE", help="results at two or more rank counts")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--hosts", type=options.positive_float, metavar="H",
                        help="predict for H hosts (ranks per host as in the inputs)")
    target.add_argument("--ranks", type=options.positive_float, metavar="N", help="predict for N ranks")
    p.add_argument("--model", choices=scaling.MODELS, default="ring",
                   help="ring (default; what NCCL and gloo use for large sizes) or tree")
    p.add_argument("--measured", dest="check", metavar="FILE",
                   help="a run at the target count: report the prediction's error against it")
    p.add_argument("--mode", choices=("out", "in"), default=None,
                   help="which mode to fit (default out-of-place where the collective has it)")
    p.add_argument("--collectives", default=None, metavar="LIST", help="only these (comma-separated)")


def ranks_per_host(path, doc):
    n, hosts = reader.ranks(doc), reader.hosts(doc)
    if not n or not hosts:
        raise UsageError(f"predict: {path} does not say its ranks and hosts (world)")
    if n % len(hosts):
        raise UsageError(f"predict: {path} has {n} ranks on {len(hosts)} hosts: not the same "
                         f"number on every host; give --ranks")
    return n // len(hosts)


def points(named_docs, wanted, only):
    """{(collective, backend, dtype, redop, mode): {size: {n: (bw_bytes, seconds)}}}"""
    out = {}
    for _, doc in named_docs:
        n = reader.ranks(doc)
        for row in doc["results"]:
            if only and row["collective"] not in only:
                continue
            mode = reader.first_mode(row, wanted)
            if mode is None or "bw_bytes" not in row:
                continue
            group = (row["collective"], row.get("backend", "?"), row.get("dtype", row["type"]),
                     row["redop"], mode)
            size = row.get("requested_size", row["size"])   # the same -b/-e at every n
            out.setdefault(group, {}).setdefault(size, {})[n] = (
                row["bw_bytes"], row[mode]["time_us"] * 1e-6)
    return out


def execute(session, args):
    docs = [(p, reader.load(p)) for p in args.files]
    target = _target(docs, args)
    check = reader.load(args.check) if args.check else None
    if check is not None and reader.ranks(check) != target:
        raise UsageError(f"predict: --check {args.check} ran on {reader.ranks(check)} ranks, "
                         f"not the {target} predicted")
    wanted = {"out": "out_of_place", "in": "in_place"}.get(args.mode)
    only = set(args.collectives.split(",")) if args.collectives else None
    measured = points(docs, wanted, only)
    checked = points([(args.check, check)], wanted, only) if check is not None else {}
    if not measured:
        raise UsageError("predict: no rows to fit")
    for p, d in docs:
        print(reader.describe(p, d))
    print(f"# predicting {target} ranks with the {args.model} model "
          f"(t = alpha*f(n) + beta*g(n)*S; see mpibench predict --help)")
    all_check_errors = []
    for group, per_size in measured.items():
        all_check_errors += _group(group, per_size, checked.get(group), target, args.model)
    if all_check_errors:
        errs = sorted(abs(e) for _, _, e in all_check_errors)
        worst = max(all_check_errors, key=lambda x: abs(x[2]))
        print(f"#\n# prediction vs measured at {target} ranks ({args.check}): median |error| "
              f"{errs[len(errs) // 2]:.1%}, max {abs(worst[2]):.1%} ({worst[0]} "
              f"{format_size(worst[1])}), {len(errs)} rows")
    return 0


def _target(docs, args):
    """The rank count to predict: --ranks, or --hosts times the inputs' ranks per host."""
    for p, d in docs:
        if not reader.ranks(d):
            raise UsageError(f"predict: {p} does not say how many ranks it ran on (world.size)")
    counts = sorted({reader.ranks(d) for _, d in docs})
    if len(counts) < 2:
        raise UsageError(f"predict: give runs at two or more rank counts (these all have {counts[0]})")
    if args.ranks:
        return int(args.ranks)
    ppn = {ranks_per_host(p, d) for p, d in docs}
    if len(ppn) > 1:
        raise UsageError(f"predict: the inputs differ in ranks per host ({sorted(ppn)}); give --ranks")
    return int(args.hosts) * ppn.pop()


def _group(group, per_size, checked, target, model):
    """Fit one collective's points, print the fit and its table; the (collective, size,
    error) of each row --check measured."""
    coll, backend, dtype, redop, mode = group
    pts = [(n, s, t) for size in per_size for n, (s, t) in per_size[size].items()]
    if len({n for n, _, _ in pts}) < 2:
        print(f"#\n# {coll} {dtype}: measured at one rank count only, not fitted")
        return []
    fit = scaling.fit(model, coll, pts)
    bw = 1 / fit["beta"] / 1e9 if fit["beta"] > 0 else None
    errs = [abs(e) for e in fit["errors"]]
    print(f"#\n# {coll} {dtype}{'' if redop == 'none' else ' ' + redop} "
          f"{mode.replace('_', '-')} ({backend}): {scaling.formula(model, coll)}")
    print(f"#   alpha = {us(fit['alpha'])} us per step, 1/beta = "
          f"{'inf' if bw is None else format(bw, '.4g')} GB/s per link; fit error on "
          f"{len(pts)} measured points: rms {scaling.rms(fit['errors']):.1%}, "
          f"max {max(errs):.1%}")
    factor = REGISTRY[coll].busbw_factor(target) if coll in REGISTRY else 1.0
    ns = sorted({n for n, _, _ in pts})
    headers = ["size"] + [f"t us n={n}" for n in ns] + [f"predicted t us n={target}",
                                                        f"busbw GB/s n={target}"]
    if checked is not None:
        headers += [f"measured t us n={target}", "error"]
    rows, check_errors = [], []
    for size in sorted(per_size):
        s = per_size[size][max(per_size[size])][0]
        t = scaling.predict(fit, target, s)
        row = [format_size(size)] + [
            us(per_size[size][n][1]) if n in per_size[size] else "-" for n in ns]
        row += [us(t), f"{s / t / 1e9 * factor:.4g}" if factor else "n/a"]
        if checked is not None:
            got = checked.get(size, {}).get(target)
            if got:
                err = t / got[1] - 1
                check_errors.append((coll, size, err))
                row += [us(got[1]), f"{err:+.1%}"]
            else:
                row += ["-", "-"]
        rows.append(row)
    print("\n".join("#   " + x for x in tabulate(rows, headers=headers,
                                                 disable_numparse=True).splitlines()))
    return check_errors

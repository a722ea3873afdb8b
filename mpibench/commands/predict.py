"""mpibench predict: NCCL's cost model fitted to runs at several node counts (analysis/scaling.py)."""
from ..analysis import scaling
from ..errors import UsageError
from ..measure.collectives import REGISTRY
from ..measure.dtypes import DTYPES
from ..measure.modes import MODE_KEYS
from ..measure.sizes import format_size
from ..results import predicttext, reader
from ..results.numbers import us
from .common import options

HELP = "fit each collective's ring/tree, latency/bandwidth terms to runs at several node counts; predict more"
SESSION = "offline"
FAR = 8          # a target this many times the largest input gets a warning line


def add_arguments(p):
    p.add_argument("files", nargs="+", metavar="FILE", help="results at two or more node counts")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--hosts", type=options.positive_float, metavar="H",
                        help="predict for H hosts (ranks per host as in the inputs)")
    target.add_argument("--ranks", type=options.positive_float, metavar="N", help="predict for N ranks")
    p.add_argument("--model", choices=scaling.MODELS, default="nccl",
                   help="nccl (default: ring or tree, as NCCL picks per size), or only ring or tree")
    p.add_argument("--measured", metavar="FILE", action="append",
                   help="a run at the target count: report the error (once per file)")
    p.add_argument("--mode", choices=("out", "in"), default=None,
                   help="which mode to fit (default out-of-place where the collective has it)")
    p.add_argument("--collectives", default=None, metavar="LIST", help="only these (comma-separated)")
    options.add_log_options(p, test=False)


def per_host(path, doc):
    """Ranks per host of one input (None when it does not say its hosts)."""
    n, hosts = reader.ranks(doc), reader.hosts(doc)
    if not n or not hosts or (doc.get("world") or {}).get("hosts_complete") is False:
        return None
    if n % len(hosts):
        raise UsageError(f"predict: {path} has {n} ranks on {len(hosts)} hosts: not the same "
                         f"number on every host")
    return n // len(hosts)


def points(named_docs, wanted, only, g):
    """{(collective, backend, dtype, redop, mode): [(n, g, size, S, seconds)]}; g: ranks
    per host, or None for each input's own."""
    out = {}
    for path, doc in named_docs:
        n, gg = reader.ranks(doc), g or per_host(path, doc)
        for row in doc["results"]:
            if only and row["collective"] not in only:
                continue
            mode, s = reader.first_mode(row, wanted), row.get("bw_bytes", row["size"])   # algbw = s / t
            if mode is None or not s:     # size 0: nccl-tests rounded it away
                continue
            group = (row["collective"], row.get("backend", "?"), row.get("dtype", row["type"]),
                     row["redop"], mode)
            out.setdefault(group, []).append(
                (n, gg, row.get("requested_size", row["size"]), s, row[mode]["time_us"] * 1e-6))
    return out


def match(size, n, keys):
    """The requested size a row of `size` bytes at n ranks stands for: nccl-tests rounds each
    rank's share down to elements, then 16 B, so the key is < (16 + element) x n B above it
    (32 x n covers every type)."""
    return min((k for k in keys if 0 <= k - size < 32 * n), key=lambda k: k - size, default=size)


def execute(session, args):
    docs = [(p, reader.load(p, args.collective)) for p in args.files]
    target, g, flat = _target(docs, args)
    checks = [(p, reader.load(p, args.collective)) for p in args.measured or []]
    for p, d in checks:
        if reader.ranks(d) != target:
            raise UsageError(f"predict: --measured {p} ran on {reader.ranks(d)} ranks, "
                             f"not the {target} predicted")
    wanted = MODE_KEYS.get(args.mode)
    only = set(args.collectives.split(",")) if args.collectives else None
    measured = points(docs, wanted, only, 1 if flat else None)
    checked = {}
    for p, d in checks:
        for group, pts in points([(p, d)], wanted, only, g).items():     # any backend's run
            checked.setdefault(group[:1] + group[2:], []).extend((p,) + x for x in pts)
    if not measured:
        raise UsageError("predict: no rows to fit")
    largest = max(reader.ranks(d) for _, d in docs)
    far = (f"{target} ranks" if flat else f"{target // g} nodes", int(target / largest)) \
        if target >= FAR * largest else None
    predicttext.header([reader.describe(p, d) for p, d in docs], target, g, args.model, flat, far)
    results = [r for group, pts in measured.items()
               for r in _group(group, pts, checked.get(group[:1] + group[2:]), target, g, args.model)]
    if checks:
        predicttext.summary(results, target, ", ".join(p for p, _ in checks), scaling.MIB)
    return 0


def _target(docs, args):
    """(ranks to predict, ranks per host, why every rank counts as a node or None):
    --ranks, or --hosts times the inputs' ranks per host."""
    for p, d in docs:
        if not reader.ranks(d):
            raise UsageError(f"predict: {p} does not say how many ranks it ran on (world.size)")
    counts = sorted({reader.ranks(d) for _, d in docs})
    if len(counts) < 2:
        raise UsageError(f"predict: give runs at two or more rank counts (these all have {counts[0]})")
    ppn = {per_host(p, d) for p, d in docs}
    if None in ppn or len(ppn) > 1:       # one host each, or hosts unknown: a flat model
        why = "hosts unknown" if None in ppn else f"the inputs differ in ranks per host ({sorted(ppn)})"
        if not args.ranks:
            raise UsageError("predict: " + ("the inputs do not all say their hosts" if None in ppn
                                             else why) + ": give --ranks")
        return int(args.ranks), 1, why
    g = ppn.pop()
    n = int(args.ranks) if args.ranks else int(args.hosts) * g
    if n % g:
        raise UsageError(f"predict: --ranks {n} is not a multiple of the inputs' {g} ranks per host")
    return n, g, None


def _target_bytes(coll, dtype, key, n):
    """S at n ranks for a requested size: nccl-tests' rounding of each rank's share."""
    model = REGISTRY.get(coll)
    el = DTYPES[dtype].size if dtype in DTYPES else 4
    return model.bw_bytes(model.counts(key // el, el, n), el, n) if model else key


def _group(group, pts, checked, target, g, model):
    """Fit one collective's points, print the fit and its table; per row --measured
    measured: (collective, size, error, inside the interval, None for a guess)."""
    coll, backend, dtype, redop, mode = group
    ns = sorted({n for n, *_ in pts})
    title = f"{coll} {dtype}{'' if redop == 'none' else ' ' + redop} {mode.replace('_', '-')} ({backend})"
    if len(ns) < 2:
        predicttext.not_fitted(title)
        return []
    keys = sorted({k for n, _, k, _, _ in pts if n == ns[0]})
    table = {}
    for n, _, size, _, t in pts:
        table.setdefault(match(size, n, keys), {})[n] = t
    f = scaling.fit(model, coll, backend, [(n, gg, s, t) for n, gg, _, s, t in pts])
    predicttext.fit(title, len(pts), ns, f["errors"], scaling.describe(f))
    by_key = {match(size, n, keys): (s, t) for _, n, _, size, s, t in checked or []}
    factor = REGISTRY[coll].busbw_factor(target) if coll in REGISTRY else 1.0
    headers = ["size"] + [f"t us n={n}" for n in ns] + [
        f"predicted t us n={target}", "interval us", f"busbw GB/s n={target}", "runs"]
    if checked is not None:
        headers += [f"measured t us n={target}", "error", "inside"]
    rows, results, unseen = [], [], False
    for key in sorted(set(table) | set(by_key)):
        s = by_key[key][0] if key in by_key else _target_bytes(coll, dtype, key, target)
        if not s:
            continue
        t, lo, hi, cand, known = scaling.predict(f, target, g, s)
        unseen |= not known
        row = [format_size(key)] + [us(table[key][n]) if n in table.get(key, {}) else "-" for n in ns]
        row += [us(t), f"{us(lo)}-{us(hi)}" if known else "none", f"{s / t / 1e9 * factor:.4g}",
                "/".join(cand) + ("" if known else " *")]
        if checked is not None and key in by_key:
            got = by_key[key][1]
            err, inside = t / got - 1, (lo <= got <= hi) if known else None
            results.append((coll, key, err, inside))
            row += [us(got), f"{err:+.1%}", {True: "yes", False: "no", None: "-"}[inside]]
        elif checked is not None:
            row += ["-", "-", "-"]
        rows.append(row)
    predicttext.table(rows, headers, target, unseen)
    return results


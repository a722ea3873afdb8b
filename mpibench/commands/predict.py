"""mpibench predict: NCCL's cost model fitted to runs at several node counts (analysis/scaling.py),
its intervals widened for what the inputs cannot see (analysis/bands.py, extrapolate.py)."""
import argparse
from math import exp, log2
from typing import Dict, List, Optional, Sequence, Set, Tuple, cast

from ..analysis import bands, extrapolate, scaling
from ..diagnose import topology
from ..errors import UsageError
from ..measure.modes import MODE_KEYS
from ..measure.sizes import format_size
from ..launch import verdict
from ..results import logfacts, predicttext, reader
from ..results.numbers import us
from ..results.predicttext import Checked
from ..results.schema import Doc
from .common import options

HELP = "fit each collective's ring/tree, latency/bandwidth terms to runs at several node counts; predict more"
SESSION = "offline"
FAR = 8          # a target this many times the largest input gets a warning line
Named = Sequence[Tuple[str, Doc]]       # the inputs: (path, document)
Key = Tuple[str, str, str, str, str]    # collective, backend, dtype, redop, mode
Measured = Tuple[str, int, int, int, float, float]     # --measured: its path, then as a point


def add_arguments(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--partial", action="store_true",
                   help="use the rows of a log cut short (rows end before its maxBytes, no trailer)")
    p.add_argument("--topology", metavar="FILE",
                   help="the switches in SLURM's topology.conf syntax: targets that need a switch tier "
                        "no input crossed are not predicted")
    options.add_log_options(p)


def per_host(path: str, doc: Doc) -> Optional[int]:
    """Ranks per host of one input (None when it does not say its hosts)."""
    n, hosts = reader.ranks(doc), reader.hosts(doc)
    if not n or not hosts or (doc.get("world") or {}).get("hosts_complete") is False:
        return None
    if n % len(hosts):
        raise UsageError(f"predict: {path} has {n} ranks on {len(hosts)} hosts: not the same "
                         f"number on every host")
    return n // len(hosts)


def points(named_docs: Named, wanted: Optional[str], only: Optional[Set[str]], g: Optional[int]
           ) -> Dict[Key, List[extrapolate.Point]]:
    """{(collective, backend, dtype, redop, mode): [(n, g, size, S, seconds)]}; g: ranks
    per host, or None for each input's own."""
    out: Dict[Key, List[extrapolate.Point]] = {}
    for path, doc in named_docs:
        n, gg = _ranks(doc), g or per_host(path, doc)
        assert gg is not None       # g, or every input says its hosts (_target)
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


def load(path: str, args: argparse.Namespace, notes: List[str]) -> Doc:
    """One input: its test (--test N, else the first of a repeated collective, said so), refused
    when cut short unless --partial."""
    doc = cast(Doc, reader.load(path, args.collective))
    if args.test:
        doc = reader.pick_test(doc, path, args.test)
    else:
        doc, note = reader.first_of_each(doc, path)
        if note:
            notes.append(note)
    facts = logfacts.read(path)
    sizes = [r.get("requested_size", r["size"]) for r in doc["results"]]
    if facts and not facts.closed and facts.max_bytes and sizes and max(sizes) < facts.max_bytes:
        cut = (f"{path} ends at {format_size(max(sizes))}, before its sweep's maxBytes "
               f"{format_size(facts.max_bytes)}, with no 'Avg bus bandwidth' line: the run was cut short")
        if not args.partial:
            raise UsageError(f"predict: {cut} (give --partial to use the rows it has)")
        notes.append(f"# {cut}: --partial, using its rows")
    return doc


def belong(docs: Named, only: Optional[Set[str]], what: str = "inputs", same: bool = True) -> None:
    """UsageError unless the files ran the same collectives (same: else those they share), each
    with the same types, and the same NCCL and nccl-tests versions where they print them."""
    held = {p: _collectives(d, only) for p, d in docs}
    if same:
        _same_collectives(held, what)
    _same_types(docs, held, what)
    _same_versions(docs, what)


def _collectives(d: Doc, only: Optional[Set[str]]) -> Set[str]:
    """The collectives one input ran, of those --collectives names where it is given."""
    return {r["collective"] for r in d["results"] if not only or r["collective"] in only}


def _same_collectives(held: Dict[str, Set[str]], what: str) -> None:
    """UsageError unless every file ran the same collectives."""
    if len({frozenset(c) for c in held.values()}) > 1:
        raise UsageError(f"predict: the {what} hold different collectives: " + "; ".join(
            f"{p} {', '.join(sorted(c)) or 'none'}" for p, c in held.items()) + " (--collectives LIST "
            "picks those they share)")


def _same_types(docs: Named, held: Dict[str, Set[str]], what: str) -> None:
    """UsageError unless the files that ran a collective ran it with the same types."""
    for c in sorted(set().union(*held.values())):
        types = {p: sorted({r.get("dtype", r["type"]) for r in d["results"] if r["collective"] == c})
                 for p, d in docs if c in held[p]}
        if len({tuple(t) for t in types.values()}) > 1:
            raise UsageError(f"predict: the {what} ran {c} with different types: " + "; ".join(
                f"{p} {', '.join(t)}" for p, t in types.items()))


def _same_versions(docs: Named, what: str) -> None:
    """UsageError unless the files ran the same NCCL and nccl-tests versions where they print them."""
    facts = {p: logfacts.read(p) for p, _ in docs}
    for key in ("NCCL", "nccl-tests"):
        seen = {p: f.versions[key] for p, f in facts.items() if f and key in f.versions}
        if len(set(seen.values())) > 1:
            raise UsageError(f"predict: the {what} ran different {key} versions: " + "; ".join(
                f"{p} {v}" for p, v in seen.items()))


def execute(session: None, args: argparse.Namespace) -> int:
    notes: List[str] = []
    only = set(args.collectives.split(",")) if args.collectives else None
    docs = [(p, load(p, args, notes)) for p in args.files]
    belong(docs, only)
    target, g, flat = _target(docs, args)
    checks = _checks(args, notes, docs, (target, g, flat), only)
    wanted = MODE_KEYS.get(args.mode)
    measured = points(docs, wanted, only, 1 if flat else None)
    checked = _checked(checks, wanted, only, g)
    if not measured:
        raise UsageError("predict: no rows to fit")
    counts = sorted({_ranks(d) for _, d in docs})
    if target < counts[0]:
        raise UsageError(f"predict: {_at(target, g, flat)} is below the smallest input "
                         f"({_at(counts[0], g, flat)}): predict carries the inputs upward only")
    tier = _tiers(args.topology, docs, target, g, flat) if args.topology else None
    _preamble(docs, notes, counts, (target, g, flat), args.model, tier)
    results = [r for group, pts in measured.items()
               for r in _group(group, pts, checked.get(group[:1] + group[2:]), target, g, flat,
                               args.model, tier[1] if tier else None)]
    if checks:
        predicttext.summary(results, target, ", ".join(p for p, _ in checks), scaling.MIB)
    return 0


def _checks(args: argparse.Namespace, notes: List[str], docs: List[Tuple[str, Doc]],
            at: Tuple[int, int, Optional[str]], only: Optional[Set[str]]) -> List[Tuple[str, Doc]]:
    """The --measured runs, loaded, each at the target (at: _target's) and like the inputs."""
    target, g, flat = at
    checks = [(p, load(p, args, notes)) for p in args.measured or []]
    for p, d in checks:
        _measured(p, d, docs, target, g, flat, only)
    if checks:
        belong(docs + checks, only, "inputs and --measured runs", same=False)
    return checks


def _checked(checks: Named, wanted: Optional[str], only: Optional[Set[str]], g: int
             ) -> Dict[Tuple[str, ...], List[Measured]]:
    """The --measured runs' points by (collective, dtype, redop, mode): any backend's run."""
    checked: Dict[Tuple[str, ...], List[Measured]] = {}
    for p, d in checks:
        for group, pts in points([(p, d)], wanted, only, g).items():     # any backend's run
            checked.setdefault(group[:1] + group[2:], []).extend((p,) + x for x in pts)
    return checked


def _preamble(docs: Named, notes: List[str], counts: List[int], at: Tuple[int, int, Optional[str]],
              model: str, tier: Optional[Tuple[str, bool]]) -> None:
    """Print the header, the notes on the inputs and where the target lies (at: _target's)."""
    target, g, flat = at
    far = (_at(target, g, flat), int(target / counts[-1])) if target >= FAR * counts[-1] else None
    predicttext.header([reader.describe(p, d) for p, d in docs], target, g, model, flat, far)
    for line in notes:
        verdict.out(line)
    verdict.out(_where(counts, target, g, flat, tier))


def _where(counts: List[int], target: int, g: int, flat: Optional[str], tier: Optional[Tuple[str, bool]]
           ) -> str:
    """The line on where the target lies: within the inputs, or above them (and the switches it needs)."""
    if target <= counts[-1]:
        return (f"# {_at(target, g, flat)} lies within the inputs ({_at(counts[0], g, flat)} to "
                f"{_at(counts[-1], g, flat)}): interpolating")
    return (f"# {_at(target, g, flat)} assumes that the switches above the measured nodes give what "
            f"the run at {_at(counts[-1], g, flat)} saw" +
            (f"; {tier[0]}" if tier else " (--topology FILE checks which switch tier it needs)"))


def _ranks(doc: Doc) -> int:
    """An input's ranks, once _target (or _measured) has refused an input that does not say."""
    n = reader.ranks(doc)
    assert n is not None
    return n


def _at(n: int, g: int, flat: Optional[str]) -> str:
    """n ranks as the inputs count them: nodes, or ranks where every rank is a node of its own."""
    return f"{n} ranks" if flat else f"{n // g} nodes"


def _measured(p: str, d: Doc, docs: Named, target: int, g: int, flat: Optional[str], only: Optional[Set[str]]
              ) -> None:
    """A --measured run: at the target, with the inputs' ranks per host and one of their collectives."""
    if reader.ranks(d) != target:
        raise UsageError(f"predict: --measured {p} ran on {reader.ranks(d)} ranks, not the {target} "
                         f"predicted")
    ppn = per_host(p, d)
    if not flat and ppn is not None and ppn != g:
        raise UsageError(f"predict: --measured {p} ran {ppn} ranks per host, the inputs {g}")
    mine = {r["collective"] for r in d["results"] if not only or r["collective"] in only}
    fitted = {r["collective"] for _, doc in docs for r in doc["results"]
              if not only or r["collective"] in only}
    if not mine & fitted:
        raise UsageError(f"predict: --measured {p} holds {', '.join(sorted(mine)) or 'no rows'}, the "
                         f"inputs {', '.join(sorted(fitted))}: nothing to compare")


def _target(docs: Named, args: argparse.Namespace) -> Tuple[int, int, Optional[str]]:
    """(ranks to predict, ranks per host, why every rank counts as a node or None):
    --ranks, or --hosts times the inputs' ranks per host."""
    for p, d in docs:
        if not reader.ranks(d):
            raise UsageError(f"predict: {p} does not say how many ranks it ran on (world.size)")
    counts = sorted({_ranks(d) for _, d in docs})
    if len(counts) < 2:
        raise UsageError(f"predict: give runs at two or more rank counts (these all have {counts[0]})")
    ppn = {p: per_host(p, d) for p, d in docs}
    if None not in ppn.values() and len(set(ppn.values())) > 1:
        raise UsageError("predict: the inputs ran different numbers of ranks (GPUs) per host: " +
                         "; ".join(f"{p} {n}" for p, n in ppn.items()))
    if None in ppn.values():        # hosts unknown: a flat model
        if not args.ranks:
            raise UsageError("predict: the inputs do not all say their hosts: give --ranks")
        return int(args.ranks), 1, "hosts unknown"
    g = next(iter(ppn.values()))
    assert g is not None
    n = int(args.ranks) if args.ranks else int(args.hosts) * g
    if n % g:
        raise UsageError(f"predict: --ranks {n} is not a multiple of the inputs' {g} ranks per host")
    return n, g, None


def _tiers(path: str, docs: Named, target: int, g: int, flat: Optional[str]) -> Tuple[str, bool]:
    """(line, whether the target needs a switch tier no input crossed) from --topology FILE and
    the hosts the inputs name."""
    entries = topology.parse(topology.read_file(path), f"--topology {path}")
    every = [h for _, hosts, _, _ in entries for h in hosts]
    for p, d in docs:
        if flat or (d.get("world") or {}).get("hosts_complete") is False or not reader.hosts(d):
            raise UsageError(f"predict: --topology needs the hosts of every input, and {p} does not "
                             f"name them all (its rank lines)")
    tree = topology.build(entries, every, f"--topology {path}", strict=False)
    missing = sorted({h for _, d in docs for h in reader.hosts(d)} - set(every))
    if missing:
        raise UsageError(f"predict: --topology {path} does not list host {missing[0]} of the inputs")
    below: Dict[topology.Switch, int] = {}
    level: Dict[topology.Switch, int] = {}
    for h in every:
        for k, s in enumerate(tree.up(tree.leaf[h])):
            below[s] = below.get(s, 0) + 1
            level[s] = max(level.get(s, 0), k)

    def crossed(hosts: List[str]) -> int:
        chains = [tree.up(tree.leaf[h]) for h in hosts]
        common = set(chains[0]).intersection(*map(set, chains[1:]))
        return min(level[s] for s in common) if common else max(level.values()) + 1
    seen = max(crossed(reader.hosts(d)) for _, d in docs)
    nodes = target // g
    fits = [level[s] for s in below if below[s] >= nodes]
    need = min(fits) if fits else None
    if need is None:
        return (f"--topology {path} lists {len(every)} hosts, fewer than {nodes}: every row beyond the "
                f"inputs not predicted (*)", True)
    if need > seen:
        return (f"{nodes} nodes need switch tier {need} (leaf switches: 0), the inputs crossed tier "
                f"{seen} at most: every row not predicted (*)", True)
    return f"{nodes} nodes fit under tier {need} (leaf switches: 0), which the inputs crossed", False


def _group(group: Key, pts: List[extrapolate.Point], checked: Optional[List[Measured]], target: int, g: int,
           flat: Optional[str], model: str, tier: Optional[bool]) -> List[Checked]:
    """Fit one collective's points, print the fit, its self-check and its table; per row of
    --measured: (collective, size, error, inside the interval, None for a guess)."""
    coll, backend, dtype, redop, mode = group
    ns = sorted({n for n, *_ in pts})
    title = f"{coll} {dtype}{'' if redop == 'none' else ' ' + redop} {mode.replace('_', '-')} ({backend})"
    if len(ns) < 2:
        predicttext.not_fitted(title)
        return []
    tab = extrapolate.table(pts)
    keys = sorted({k for n, _, k, _, _ in pts if n == ns[0]})
    by_key = {extrapolate.match(size, n, keys): (s, t) for _, n, _, size, s, t in checked or []}
    res = extrapolate.group(model, coll, backend, dtype, pts, target, g, sorted(set(tab) | set(by_key)),
                            {k: v[0] for k, v in by_key.items()}, tier=tier)
    predicttext.fit(title, len(pts), ns, res.f["errors"], scaling.describe(res.f))
    _self_check(res, ns, target, g, flat, tier)
    factor = extrapolate.bus_bytes(coll, 1.0, target)
    headers = _headers(ns, target, checked is not None)
    rows, results = [], []
    for r in res.rows:
        row, result = _row(coll, r, tab, ns, factor, by_key if checked is not None else None)
        if result is not None:
            results.append(result)
        rows.append(row)
    predicttext.table(rows, headers, target, {r.why for r in res.rows if r.why}, exp(bands.DECLINE))
    return results


def _headers(ns: List[int], target: int, measured: bool) -> List[str]:
    """The table's headers: the inputs' times, the prediction and, with --measured, its error."""
    headers = ["size"] + [f"t us n={n}" for n in ns] + [
        f"predicted t us n={target}", "interval us", f"busbw GB/s n={target}", "runs"]
    if measured:
        headers += [f"measured t us n={target}", "error", "inside"]
    return headers


def _self_check(res: extrapolate.Group, ns: List[int], target: int, g: int, flat: Optional[str],
                tier: Optional[bool]) -> None:
    """Print the fit's held-out check (or why it has none), two flat counts' widening and a change
    of regime."""
    if res.check:
        c = res.check
        predicttext.held_out(_at(c.held, g, flat), c.error, c.rows, c.held_ok, c.rms)
    elif len(ns) == 2 and target > ns[-1] and tier is None:
        predicttext.unchecked(_at(ns[0], g, flat), _at(ns[1], g, flat))
    if res.flat:
        assert res.fall is not None     # the rows two flat counts widened
        predicttext.flat(_at(ns[0], g, flat), _at(ns[1], g, flat), res.fall, bands.FLAT, bands.TIER,
                         log2(target / ns[-1]), _at(target, g, flat))
    if res.regime:
        before, after = res.regime
        assert res.check is not None    # the held-out check found the change
        predicttext.regime(_at(before, g, flat), _at(after, g, flat), res.check.error, res.check.rms)


def _row(coll: str, r: extrapolate.Row, tab: Dict[int, Dict[int, Tuple[float, float]]], ns: List[int],
         factor: float, by_key: Optional[Dict[int, Tuple[float, float]]]
         ) -> Tuple[List[str], Optional[Checked]]:
    """One row of the table and, where --measured has its size, (collective, size, error, inside);
    by_key: the measured (S, seconds) by size, None without --measured."""
    row = [format_size(r.key)] + [us(tab[r.key][n][1]) if n in tab.get(r.key, {}) else "-" for n in ns]
    row += [us(r.t), "none" if r.why else f"{us(r.lo)}-{us(r.hi)}", f"{r.s / r.t / 1e9 * factor:.4g}",
            "/".join(r.cand) + (" *" if r.why else "")]
    if by_key is None:
        return row, None
    if r.key not in by_key:
        return row + ["-", "-", "-"], None
    got = by_key[r.key][1]
    err, inside = r.t / got - 1, None if r.why else r.lo <= got <= r.hi
    row += [us(got), f"{err:+.1%}", {True: "yes", False: "no", None: "-"}[inside]]
    return row, (coll, r.key, err, inside)

"""mpibench compare: line up the rows of saved results and say what changed."""
import argparse
from typing import List, Sequence, Tuple, cast

from ..errors import CheckFailed
from ..results import comparetext as text, reader
from ..results.numbers import counted
from ..results.schema import Doc
from .common import options

HELP = "compare saved results row by row against the first file (the baseline)"
SESSION = "offline"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("baseline", metavar="BASE.json", help="the reference results")
    p.add_argument("others", nargs="+", metavar="FILE.json", help="results to compare with it")
    p.add_argument("--noise", type=options.positive_float, default=text.NOISE, metavar="X",
                   help=f"without trials: a ratio within 1 +- X is noise (default {text.NOISE:g})")
    options.add_min_share(p, "exit 1 when any row's busbw is", "the baseline's", None)
    p.add_argument("--min-size", type=options.size_arg, default=0, metavar="SIZE",
                   help="compare only rows of at least SIZE bytes (small sizes are latency noise)")
    p.add_argument("--mode", choices=("both", "out", "in"), default="both",
                   help="out-of-place, in-place or both (default both)")
    options.add_log_options(p)


def load(paths: Sequence[str], args: argparse.Namespace) -> Tuple[List[Doc], List[str]]:
    """The documents, each narrowed to one test where a log holds repeats (--test N, else
    the first of each repeated collective), and the lines saying which test is used."""
    docs: List[Doc] = []
    notes: List[str] = []
    for p in paths:
        whole = cast(Doc, reader.load(p, args.collective))
        doc = reader.pick_test(whole, p, args.test)
        if args.test is not None and len(reader.tests(whole)) > 1:
            notes.append(f"# {p}: test {args.test} ({doc['tests'][0]['collective']}, line "
                         f"{doc['tests'][0]['line']})")
        elif args.test is None:
            doc, note = reader.first_of_each(doc, p)
            notes += [note] if note else []
        docs.append(doc)
    return docs, notes


def execute(session: None, args: argparse.Namespace) -> int:
    paths = [args.baseline] + args.others
    docs, notes = load(paths, args)
    modes = reader.modes(args.mode)
    # one backend per file: the backend is the file's, and rows of two files line up
    # whatever it is (nccl-tests' log against mpibench on gloo)
    by_backend = any(len({r.get("backend") for r in d["results"]}) > 1 for d in docs)
    found = [text.figures(d, modes, args.min_size, by_backend) for d in docs]
    figs = [f for f, _ in found]
    common = [k for k in figs[0] if all(k in f for f in figs[1:])]
    trained = all((d.get("train") or {}).get("summary") for d in docs)
    if not common and not trained:
        return text.nothing_in_common(paths, docs)
    text.preamble(paths, docs, notes, found)
    # train results: the steps first, then any collective rows they share
    failures = text.train_steps(paths, docs, args.min_share) if trained else []
    if common:
        failures += text.rows(paths, docs, figs, common, args.noise, args.min_share)
    if failures:
        text.below(failures, args.min_share)
        raise CheckFailed(f"{counted(len(failures), 'row')} below {args.min_share:g} x the baseline "
                          f"({paths[0]})")
    return 0

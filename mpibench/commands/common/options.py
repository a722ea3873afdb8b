"""Argument types and the options several commands share. A type raises
argparse.ArgumentTypeError, which the parser turns into one line and exit code 2."""
import argparse
import math
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, TypeVar

from ...errors import UsageError
from ...launch import bootstrap

# --backend's torch choices: auto (nccl on CUDA GPUs, else gloo) or one by name
AUTO_AND_TORCH_BACKENDS: Tuple[str, ...] = ("auto",) + bootstrap.TORCH_BACKENDS
N = TypeVar("N", int, float)


def add_backend(parser: argparse.ArgumentParser,
                choices: Tuple[str, ...] = AUTO_AND_TORCH_BACKENDS + ("mpi",), several: bool = False) -> None:
    """--backend, parsed into a tuple of names (one unless several)."""
    def names(text: str) -> Tuple[str, ...]:
        items = [t.strip().lower() for t in text.split(",") if t.strip()]
        if unknown := [i for i in items if i not in choices]:
            raise argparse.ArgumentTypeError(
                f"invalid choice: '{unknown[0]}' (choose from {', '.join(choices)})")
        if not items or len(set(items)) != len(items) or (len(items) > 1 and not several):
            raise argparse.ArgumentTypeError(
                f"{text!r}: give {'distinct backends, comma-separated' if several else 'one backend'}")
        if sum(i in AUTO_AND_TORCH_BACKENDS for i in items) > 1:
            raise argparse.ArgumentTypeError(f"{text!r}: one torch backend per job (one process group)")
        return tuple(items)
    mpi = ("; mpi: the MPI library itself through mpi4py (needs an MPI launcher)"
           if "mpi" in choices else "")
    compare = "; comma-separated to compare, e.g. gloo,mpi" if several else ""
    parser.add_argument("--backend", default="auto", type=names, metavar="NAME",
                        help=f"{' | '.join(choices)} (default auto: nccl on CUDA GPUs, else gloo"
                             f"{mpi}{compare})")


def torch_backend(names: Sequence[str]) -> Optional[str]:
    """The torch process group a --backend value needs (None: MPI only)."""
    return next((n for n in names if n in AUTO_AND_TORCH_BACKENDS), None)


def at_least(low: float, kind: Callable[[str], N] = int) -> Callable[[str], N]:
    """An argparse type: a number (kind int: a whole number) no smaller than low."""
    def conv(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a {'whole number' if kind is int else 'number'}: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {text}")
        return value
    return conv


def size_arg(text: str) -> int:
    """An argparse type: a byte size such as 8, 64K, 1M, 4G."""
    from ...measure.sizes import parse_size
    try:
        return parse_size(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


number_arg = at_least(-math.inf, float)     # any number


def positive_float(text: str) -> float:
    value = number_arg(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text}")
    return value


def add_log_options(parser: argparse.ArgumentParser, test: bool = True) -> None:
    """--collective and --test: which table of a printed nccl-tests log is read."""
    parser.add_argument("--collective", default=None, metavar="NAME",
                        help="the collective of printed nccl-tests tables that do not name "
                             "theirs (old logs, pasted tails), e.g. all_to_all")
    if test:
        parser.add_argument("--test", type=at_least(1), default=None, metavar="N",
                            help="in a log that holds several tests, use only the N-th "
                                 "(counted from 1, in file order)")


MIN_SHARE = 0.8


def share_arg(text: str) -> float:
    """An argparse type: a share of a reference, above 0 and at most 1."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1: {text}")
    return value


def add_min_share(parser: argparse.ArgumentParser, what: str, reference: str,
                  default: Optional[float] = MIN_SHARE, shown: Optional[str] = None) -> None:
    """--min-share F, one meaning in every command: `what` falls below F times `reference`,
    counted in speed (bandwidth, or 1 / time: F 0.8 is a time over 1.25 times the reference's)."""
    shown = shown or ("none" if default is None else f"{default:g}")
    parser.add_argument("--min-share", type=share_arg, default=default, metavar="F",
                        help=f"{what} below F times {reference} (0 < F <= 1; default {shown})")


def share_margin(share: float) -> float:
    """A time margin from a --min-share: slower than 1 / share times the reference's time."""
    return 1 / share - 1


def add_json(parser: argparse.ArgumentParser, what: str = "results as JSON", metrics: bool = True) -> None:
    """--json PATH (the results document) and, with metrics, --metrics FILE (its figures in
    Prometheus' text format, results/metrics.py)."""
    parser.add_argument("--json", metavar="PATH", help=f"write {what} (never overwrites)")
    if metrics:
        parser.add_argument("--metrics", metavar="FILE",
                            help="write the figures in Prometheus' text format, replaced whole "
                                 "at each write (for node_exporter's textfile collector: name it "
                                 "*.prom)")


# nccl-tests 2.19.6 options (src/common.cu) that mpibench runs at one value only: flag, long
# name, that value (None: no value), and why no other is possible.
_ONE_PER_PROCESS = ("mpibench runs one GPU and one thread per process; start one process per "
                    "GPU (mpirun -np, srun --ntasks-per-node) instead of {v} ")
NCCL_TESTS_FIXED = (
    ("-t", "--nthreads", 1, _ONE_PER_PROCESS + "threads per process"),
    ("-g", "--ngpus", 1, _ONE_PER_PROCESS + "GPUs per process"),
    ("-m", "--agg-iters", 1, "mpibench times one call per iteration; {v} calls in one NCCL group "
                             "per iteration (nccl-tests' aggregation) are not implemented"),
    ("-p", "--parallel-init", 0, "parallel initialisation is for several GPUs per process, and "
                                 "mpibench runs one"),
    ("-y", "--stream-null", 0, "torch.distributed launches NCCL calls on its own streams, never "
                               "the null stream"),
    ("-C", "--report-cputime", 0, "mpibench reports elapsed time; the CPU time per call is not "
                                  "measured"),
    ("-S", "--report-timestamps", 0, "mpibench prints no timestamp per row (the results file "
                                     "has the start and end times)"),
    ("-R", "--local-register", 0, "NCCL buffer registration is not reachable through "
                                  "torch.distributed"),
    ("-x", "--cta-policy", None, "mpibench does not set NCCL's per-communicator CTA policy "
                                 "(ncclConfig_t) through torch.distributed"),
    ("-D", "--device-implementation", 0, "NCCL's device-side implementations are not reachable "
                                         "through torch.distributed"),
    ("-V", "--device-cta-count", None, "the device CTA count goes with -D above 0, which mpibench "
                                       "does not run"),
    ("-M", "--memory", 0, "nccl-tests' GPU memory report is not printed (mpibench prints each "
                          "rank's peak resident memory in every run)"),
    ("-u", "--unalign", 0, "misaligned buffers are not implemented (torch allocates aligned ones)"),
)


def add_nccl_tests_fixed(parser: argparse.ArgumentParser) -> None:
    """nccl-tests' options mpibench honours at one value; check_nccl_tests_fixed refuses others."""
    for flag, name, value, _ in NCCL_TESTS_FIXED:
        shown = "not supported" if value is None else f"{value} only"
        parser.add_argument(flag, name, type=int, default=value, metavar="N",
                            help=f"nccl-tests' {name[2:].replace('-', '_')}: {shown}")


def check_nccl_tests_fixed(args: argparse.Namespace) -> None:
    for flag, name, value, why in NCCL_TESTS_FIXED:
        given = getattr(args, name[2:].replace("-", "_"))
        if given != value:
            fix = f" (use {flag} {value} or leave it out)" if value is not None else ""
            raise UsageError(f"{flag} {given}: {why.format(v=given)}{fix}")


def one_spelling(parser: argparse.ArgumentParser, argv: Iterable[str]) -> List[str]:
    """argv with --a_b written --a-b wherever --a-b is an option of this parser: nccl-tests
    spells its long options with '_', mpibench with '-', and both are accepted (as torchrun
    does). Nothing after '--' is touched."""
    known = [s for action in parser._actions for s in action.option_strings]
    out = list(argv)
    for k, arg in enumerate(out):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name.startswith("--") and "_" in name and name not in known:
            dashed = name.replace("_", "-")
            if dashed in known:
                out[k] = dashed + eq + value
    return out

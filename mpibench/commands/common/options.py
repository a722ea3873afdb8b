"""Argument types every command's parser uses: sizes, whole numbers, positive numbers,
--backend. Each raises argparse.ArgumentTypeError, which the parser turns into one line
and exit code 2."""
import argparse

from ...errors import UsageError
from ...launch import bootstrap

# --backend's torch choices: auto (nccl on CUDA GPUs, else gloo) or one by name
AUTO_AND_TORCH_BACKENDS = ("auto",) + bootstrap.TORCH_BACKENDS


def add_backend(parser, choices=AUTO_AND_TORCH_BACKENDS + ("mpi",), several=False):
    """--backend, parsed into a tuple of names (one unless several)."""
    def names(text):
        items = [t.strip().lower() for t in text.split(",") if t.strip()]
        for item in items:
            if item not in choices:
                raise argparse.ArgumentTypeError(f"invalid choice: '{item}' (choose from {', '.join(choices)})")
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


def torch_backend(names):
    """The torch process group a --backend value needs (None: MPI only)."""
    return next((n for n in names if n in AUTO_AND_TORCH_BACKENDS), None)


def int_at_least(low):
    """An argparse type: a whole number no smaller than low."""
    def conv(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {text}")
        return value
    return conv


def size_arg(text):
    """An argparse type: a byte size such as 8, 64K, 1M, 4G."""
    from ...measure.sizes import parse_size
    try:
        return parse_size(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def number_arg(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text}")
    return value


def add_log_options(parser, test=True):
    """--collective for printed tables that do not name theirs; --test for logs that hold
    several tests (each a table with its own average)."""
    parser.add_argument("--collective", default=None, metavar="NAME",
                        help="the collective of printed nccl-tests tables that do not name "
                             "theirs (old logs, pasted tails), e.g. all_to_all")
    if test:
        parser.add_argument("--test", type=int_at_least(1), default=None, metavar="N",
                            help="in a log that holds several tests, use only the N-th "
                                 "(counted from 1, in file order)")


def old_spelling(parser, flag, dest, new, **kw):
    """An old spelling of an option, kept for one release: it sets the same value as the new
    one, and the command line prints one note saying what to write instead (cli.py)."""
    class Deprecated(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, values)
            notes = list(getattr(namespace, "deprecations", None) or [])
            notes.append(f"{option_string} is an old spelling: write {new} (the old one goes in "
                         f"the next release)")
            namespace.deprecations = notes
    parser.add_argument(flag, dest=dest, action=Deprecated, default=argparse.SUPPRESS,
                        help=f"old spelling of {new}", **kw)


MIN_SHARE = 0.8


def share_arg(text):
    """An argparse type: a share of a reference, above 0 and at most 1."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1: {text}")
    return value


def margin_as_share(text):
    """An old --slow-margin X (slow over 1 + X times the median time) as the share it means:
    speed below 1 / (1 + X) times the median's."""
    return 1 / (1 + positive_float(text))


def add_min_share(parser, what, reference, default=MIN_SHARE):
    """--min-share F, one meaning in every command: `what` falls below F times `reference`,
    counted in speed (bandwidth, or 1 / time: F 0.8 is a time over 1.25 times the reference's)."""
    shown = "none" if default is None else f"{default:g}"
    parser.add_argument("--min-share", type=share_arg, default=default, metavar="F",
                        help=f"{what} below F times {reference} (0 < F <= 1; default {shown})")


def share_margin(share):
    """A time margin from a --min-share: slower than 1 / share times the reference's time."""
    return 1 / share - 1


def add_metrics(parser):
    """--metrics FILE: the figures in Prometheus' text format (results/metrics.py)."""
    parser.add_argument("--metrics", metavar="FILE",
                        help="write the figures in Prometheus' text format, replaced whole at "
                             "each write (for node_exporter's textfile collector: name it *.prom)")

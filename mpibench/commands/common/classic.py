"""What the classic commands (allreduce, latency, flagsync, demo) share: one backend,
the run-style preamble and results document, small buffers agreed on by every rank,
and the units their users know (GBps and Gbps, host:local_rank)."""
import math

from ...diagnose import preamble
from ...errors import UsageError
from ...measure.backends import make
from ...measure.collectives.base import Ctx
from ...measure.dtypes import parse_dtypes
from ...results.output import open_output
from . import guard, options


def add_common(p, dtype=True):
    if dtype:
        p.add_argument("-d", "--dtype", default="float32", metavar="NAME",
                       help="data type (default float32): float32, float16, bfloat16, float64, "
                            "int32, int64, int8, uint8")
    options.add_backend(p)
    guard.add_timeout(p, "start-up, the warm-up, the timed calls of one kind, or gathering")
    p.add_argument("--json", metavar="PATH", help="write results as JSON (never overwrites)")


def one_dtype(text):
    dtypes = parse_dtypes(text)
    if len(dtypes) != 1:
        raise UsageError(f"-d {text}: give one data type")
    return dtypes[0]


def begin(session, args, command, title, config):
    """The backend, the output (rank 0) and every rank's record; prints the preamble."""
    session.watch.arm(f"{command}: start-up (every rank's device and versions)")
    backend = make(session, args.backend[0])
    out = open_output(session, command, args)
    records, versions = preamble.gather(session)
    if session.rank == 0:
        out.say(f"# mpibench {command}: {title}")
        preamble.describe(session, out, [backend.name], records, versions, config)
        out.announce_files()
    return backend, out, records


def check_supported(backend, coll, dtype, op="sum"):
    reason = backend.unsupported(coll, dtype, op)
    if reason:
        raise UsageError(f"{coll.name} -d {dtype.name} on {backend.name}: {reason}")


def tensor(session, backend, dtype, count, values=None):
    """A count-element tensor on the backend's device, allocated on every rank or none."""
    error, buf = None, None
    try:
        buf = backend.typed(backend.alloc(count * dtype.size, session.rank), dtype)
    except Exception as exc:
        if not backend.is_oom(exc):
            raise
        error = f"cannot allocate {count * dtype.size} bytes: {type(exc).__name__}"
    session.agree(error, 1)
    if values is not None:
        buf.copy_(backend.torch.tensor(values, dtype=buf.dtype))
    return buf


def ctx(session, backend, dtype, count, op="sum", root=-1, in_place=True):
    return Ctx(rank=session.rank, n=session.size, root=root, op=op, dtype=dtype, count=count,
               in_place=in_place, backend_op=backend.ops.get(op), device=backend.device)


def labels(records):
    """host:local_rank of every rank, as the classic scripts print them."""
    return [f"{r['hostname']}:{r['local_rank']}" for r in records]


def bw_cells(value):
    """'12.345 GBps (98.76 Gbps)', or n/a."""
    return "n/a" if value is None else f"{value:.3f} GBps ({value * 8:.2f} Gbps)"


def ms(seconds):
    """Milliseconds with four significant digits and no exponent."""
    value = seconds * 1e3
    digits = max(0, 3 - math.floor(math.log10(abs(value)))) if value else 3
    return f"{value:.{digits}f}"

"""mpibench p2p: bandwidth and latency between every pair of hosts, and who is slow."""
import argparse
from typing import Optional

from ..analysis import heatmap
from ..diagnose import links, pairs, rankfacts
from ..errors import UsageError
from ..launch.session import Session
from ..measure.dtypes import DTYPES
from ..measure.p2p import PairBench
from ..measure.sizes import format_size
from ..results import linkstext, rows
from ..results.files import ResultFile
from ..results.numbers import counted
from ..results.output import open_output
from .common import guard, options

HELP = "bandwidth and latency between every pair of hosts; names slow links and hosts"
BYTES = DTYPES["uint8"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-b", "--size", type=options.size_arg, default=None, metavar="SIZE",
                   help="bytes per transfer for bandwidth (default 4M on CPUs, 256M on GPUs)")
    p.add_argument("--latency-size", type=options.size_arg, default=8, metavar="SIZE",
                   help="bytes of the ping-pong for latency (default 8)")
    p.add_argument("-n", "--iters", type=options.at_least(1), default=10,
                   help="timed transfers per link, each after a barrier (default 10)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=2,
                   help="untimed transfers per link first (default 2)")
    p.add_argument("--latency-iters", type=options.at_least(1), default=50, metavar="N",
                   help="ping-pong round trips per pair (default 50)")
    p.add_argument("--bidirectional", action="store_true",
                   help="both ranks of a pair send at once (bandwidth = bytes both ways / time)")
    p.add_argument("--every-rank", action="store_true",
                   help="every pair of ranks instead of one rank per host")
    options.add_min_share(p, "name links and hosts", "the others")
    p.add_argument("--png", metavar="PATH", help="also draw the bandwidth matrix as a heatmap "
                                                 "(needs matplotlib; never overwrites)")
    options.add_json(p, "every link's figures as JSON")
    guard.add_timeout(p, "start-up, or one round of pairs with its warm-up and latency")
    options.add_backend(p, options.AUTO_AND_TORCH_BACKENDS)


def execute(session: Session, args: argparse.Namespace) -> int:
    from ..measure.backends.torchdist import TorchBackend
    backend = TorchBackend(session)
    size = args.size or links.default_size(backend)
    ranks = pairs.participants(session.hosts, args.every_rank)
    if len(ranks) < 2:
        raise UsageError("p2p needs two hosts (or, with --every-rank, two ranks): this job has "
                         f"{counted(session.size, 'rank')} on one host"
                         + ("" if args.every_rank else "; add --every-rank to measure ranks on "
                                                       "one host"))
    if args.png:
        session.agree(heatmap.unavailable() if session.rank == 0 else None)
    out = open_output(session, "p2p", args)
    png = _reserve_png(session, args.png) if args.png else None
    rounds = pairs.schedule(ranks, session.hosts)
    bench = PairBench(session, backend, size, iters=args.iters, warmup=args.warmup,
                      bidirectional=args.bidirectional, latency_size=args.latency_size,
                      latency_iters=args.latency_iters)
    session.agree(bench.allocate(session.rank in ranks), 1)
    labels = [f"{h}:{r}" if args.every_rank else h for r, h in enumerate(session.hosts)]
    if session.rank == 0:
        assert out is not None
        linkstext.p2p_header(out, args, nranks=len(ranks), nhosts=len(set(session.hosts)),
                             backend=backend.name, launcher=session.launcher, size=size, rounds=rounds)
        out.set(world=rankfacts.world(session, backend.name),
                config={"participants": ranks, "size": size, "latency_size": args.latency_size,
                        "iters": args.iters, "warmup": args.warmup,
                        "latency_iters": args.latency_iters, "bidirectional": args.bidirectional,
                        "threshold": args.min_share, "rounds": [[list(p) for p in r] for r in rounds]},
                env=rankfacts.net_env())
        out.announce_files()
        linkstext.heatmap(out, png, " will be written to")
    collected, latency = links.measure(session, bench, rounds, labels, out, with_latency=True)
    session.watch.disarm()
    if session.rank != 0:
        return 0
    assert out is not None
    links.report(out, bench, collected, hosts=session.hosts, labels=labels, ranks=ranks, latency=latency,
                 threshold=args.min_share)
    for link in out.doc["links"]:
        # One row per link (sendrecv: busbw = algbw), the slower end's median iteration
        out.record_row(rows.one_mode(
            "sendrecv", "out_of_place", [link["time_us"] / 1e6], backend=backend.name, dtype=BYTES,
            size=link["size"], count=link["size"], bw_bytes=link["bytes_moved"], factor=1.0,
            link=f"{link['from']}->{link['to']}"))
    if png:
        heatmap.draw(png, [labels[r] for r in ranks],
                     out.doc["p2p"]["bandwidth_GBps"],
                     f"p2p bandwidth GB/s at {format_size(size)}"
                     f"{' (both ways at once)' if args.bidirectional else ', row sends to column'}")
        linkstext.heatmap(out, png)
    out.finish()
    return 0


def _reserve_png(session: Session, path: str) -> Optional[str]:
    """Rank 0 reserves the picture's file name now, as for the JSON file."""
    reserved, error = None, None
    if session.rank == 0:
        try:
            reserved = ResultFile(path, None).path
        except UsageError as exc:
            error = str(exc)
    session.agree(error)
    return reserved


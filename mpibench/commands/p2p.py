"""mpibench p2p: bandwidth and latency between every pair of hosts, and who is slow."""
from statistics import median

from tabulate import tabulate

from .. import cli, jobinfo, pairs, sysinfo
from ..collectives.base import algbw
from ..errors import UsageError
from ..output import open_output
from ..p2p import PairBench
from ..sizes import format_size

HELP = "bandwidth and latency between every pair of hosts; names slow links and hosts"
DESCRIPTION = (
    "One rank per host (the lowest rank on each) exchanges with every other host's in "
    "round-robin rounds, so that no host is in two pairs at once; ranks not in a pair "
    "wait at an MPI barrier. Bandwidth: send/recv of one size (default 4 MiB on CPUs, "
    "256 MiB on GPUs), every iteration after a barrier, the median iteration shown. "
    "Latency: half the round trip of a ping-pong of 8 bytes. Then the links and hosts "
    "below --threshold of the others are named.")
SESSION = "args"

CPU_SIZE = 4 << 20
GPU_SIZE = 256 << 20


def _fraction(text):
    value = cli.positive_float(text)
    if value >= 1:
        import argparse
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text}")
    return value


def add_arguments(p):
    p.add_argument("-s", "--size", type=cli.size_arg, default=None, metavar="SIZE",
                   help="bytes per transfer for bandwidth (default 4M on CPUs, 256M on GPUs)")
    p.add_argument("--latency-size", type=cli.size_arg, default=8, metavar="SIZE",
                   help="bytes of the ping-pong for latency (default 8)")
    p.add_argument("-n", "--iters", type=cli.int_at_least(1), default=10,
                   help="timed transfers per link, each after a barrier (default 10)")
    p.add_argument("-w", "--warmup", type=cli.int_at_least(0), default=2,
                   help="untimed transfers per link first (default 2)")
    p.add_argument("--latency-iters", type=cli.int_at_least(1), default=50, metavar="N",
                   help="ping-pong round trips per pair (default 50)")
    p.add_argument("--bidirectional", action="store_true",
                   help="both ranks of a pair send at once (bandwidth = bytes both ways / time)")
    p.add_argument("--ranks", action="store_true",
                   help="every pair of ranks instead of one rank per host")
    p.add_argument("--threshold", type=_fraction, default=0.8, metavar="F",
                   help="name links and hosts below F times the others (default 0.8)")
    p.add_argument("--png", metavar="PATH", help="also draw the bandwidth matrix as a heatmap "
                                                 "(needs matplotlib; never overwrites)")
    p.add_argument("--json", metavar="PATH", help="write every link's figures as JSON (never overwrites)")
    p.add_argument("--timeout", type=cli.positive_float, default=300.0, metavar="SECONDS",
                   help="process-group timeout (default 300)")
    cli.add_backend(p, cli.TORCH_BACKENDS)


def execute(session, args):
    from ..backends.torchdist import TorchBackend
    backend = TorchBackend(session)
    size = args.size or default_size(backend)
    ranks = pairs.participants(session.hosts, args.ranks)
    if len(ranks) < 2:
        raise UsageError("p2p needs two hosts (or, with --ranks, two ranks): this job has "
                         f"{session.size} rank{'s' if session.size != 1 else ''} on one host"
                         + ("" if args.ranks else "; add --ranks to measure ranks on one host"))
    if args.png:
        from .. import heatmap
        session.agree(heatmap.unavailable() if session.rank == 0 else None)
    out = open_output(session, "p2p", args)
    png = _reserve_png(session, args.png)
    rounds = pairs.schedule(ranks, session.hosts)
    bench = PairBench(session, backend, size, args.latency_size, args.iters, args.warmup,
                      args.latency_iters, args.bidirectional)
    session.agree(bench.allocate(session.rank in ranks), 1)
    labels = [f"{h}:{r}" if args.ranks else h for r, h in enumerate(session.hosts)]
    if session.rank == 0:
        _header(session, out, args, backend, ranks, rounds, size, png)
    collected, latency = measure(session, bench, rounds, labels, out, with_latency=True)
    if session.rank != 0:
        return 0
    report(out, bench, session.hosts, labels, ranks, collected, latency, args.threshold)
    if png:
        from .. import heatmap
        heatmap.draw(png, [labels[r] for r in ranks],
                     _matrix(ranks, _bandwidths(collected, bench)),
                     f"p2p bandwidth GB/s at {format_size(size)}"
                     f"{' (both ways at once)' if args.bidirectional else ', row sends to column'}")
        out.say(f"# heatmap: {png}")
    out.finish()
    return 0


def default_size(backend):
    return GPU_SIZE if backend.cuda else CPU_SIZE


def measure(session, bench, rounds, labels, out, with_latency):
    """Every round on every rank; rank 0 collects each round as it ends (and saves it)."""
    collected, latency = {}, {}
    for k, rnd in enumerate(rounds):
        gathered = session.comm.gather(bench.run_round(rnd, with_latency), root=0)
        if session.rank == 0:
            _collect(gathered, k, collected, latency)
            out.set(links=_links(labels, collected, latency, bench, None))
    return collected, latency


def link_check(session, backend, out, size, iters, warmup, threshold=0.8):
    """run's check of the links between hosts: one rank per host, every pair of hosts in
    round-robin rounds, bandwidth only. Collective times cannot say which link is slow
    (every rank waits for the slowest one); pairs can."""
    ranks = pairs.participants(session.hosts)
    if len(ranks) < 2 or iters == 0:
        return None
    size = min(size, default_size(backend))
    bench = PairBench(session, backend, size, 1, iters, warmup, 1, False)
    session.agree(bench.allocate(session.rank in ranks), 1)
    rounds = pairs.schedule(ranks, session.hosts)
    if session.rank == 0:
        out.say(f"#\n# links between hosts at {format_size(size)}: one rank per host, "
                f"{len(rounds)} round{'s' if len(rounds) != 1 else ''} of pairs, "
                f"{iters} transfers each way after a barrier (a slow link makes every rank of a "
                f"collective equally slow; pairs show which it is):")
    collected, _ = measure(session, bench, rounds, session.hosts, out, with_latency=False)
    bench.send_buf = bench.recv_buf = None
    if session.rank != 0:
        return None
    return report(out, bench, session.hosts, session.hosts, ranks, collected, {}, threshold,
                  matrix=len(ranks) <= 16)


def _reserve_png(session, path):
    """Rank 0 reserves the picture's file name now, as for the JSON file."""
    if not path:
        return None
    from ..results import ResultFile
    reserved, error = None, None
    if session.rank == 0:
        try:
            reserved = ResultFile(path, None)
        except UsageError as exc:
            error = str(exc)
    session.agree(error)
    return reserved.path if reserved else None


def _header(session, out, args, backend, ranks, rounds, size, png):
    hosts = list(dict.fromkeys(session.hosts))
    who = "every rank" if args.ranks else "one rank per host, the lowest on each"
    out.say(f"# mpibench p2p: {len(ranks)} ranks on {len(hosts)} host{'s' if len(hosts) != 1 else ''} "
            f"take part ({who}), backend {backend.name}, launcher {session.launcher}")
    out.say(f"# bandwidth at {format_size(size)}: {args.iters} transfers per link after "
            f"{args.warmup} warm-up{'s' if args.warmup != 1 else ''}, each after a barrier, "
            + ("both ranks sending at once (bytes both ways / time)" if args.bidirectional
               else "one direction at a time (row sends to column)"))
    out.say(f"# latency at {format_size(args.latency_size)}: half the round trip of "
            f"{args.latency_iters} ping-pongs")
    npairs = sum(len(r) for r in rounds)
    out.say(f"# schedule: {npairs} pair{'s' if npairs != 1 else ''} in {len(rounds)} "
            f"round{'s' if len(rounds) != 1 else ''}, no host in two pairs at once; "
            f"ranks not in a pair wait at an MPI barrier")
    env = sysinfo.net_env()
    out.set(world=jobinfo.world(session, backend.name),
            config={"participants": ranks, "size": size, "latency_size": args.latency_size,
                    "iters": args.iters, "warmup": args.warmup,
                    "latency_iters": args.latency_iters, "bidirectional": args.bidirectional,
                    "threshold": args.threshold, "rounds": [[list(p) for p in r] for r in rounds]},
            env=env)
    out.announce_files()
    if png:
        out.say(f"# heatmap will be written to {png}")


def _collect(gathered, round_index, collected, latency):
    """Per link: per-iteration seconds, the slower of its two ends in each iteration."""
    ends = {}
    for records in gathered:
        for rec in records:
            key = (rec["from"], rec["to"])
            ends.setdefault(key, []).append(rec["times"])
            if rec["latency_s"] is not None:
                latency[tuple(sorted(key))] = rec["latency_s"]
    for key, series in ends.items():
        collected[key] = {"round": round_index,
                          "times": [max(ts) for ts in zip(*series)]}


def _moved(bench):
    """Bytes one timed transfer moves: both ways at once count twice (as osu_bibw)."""
    return 2 * bench.size if bench.bidirectional else bench.size


def _bandwidths(collected, bench):
    out = {}
    for (a, b), rec in collected.items():
        bw = algbw(_moved(bench), median(rec["times"]))
        out[(a, b)] = bw
        if bench.bidirectional:
            out[(b, a)] = bw
    return out


def _matrix(ranks, values):
    return [[values.get((a, b)) for b in ranks] for a in ranks]


def _latency_values(latency):
    out = {}
    for (a, b), s in latency.items():
        out[(a, b)] = out[(b, a)] = s * 1e6
    return out


def _links(labels, collected, latency, bench, analysis):
    moved = _moved(bench)
    verdicts = {}
    if analysis:
        verdicts = {(x["from"], x["to"]): x for x in analysis["links"]}
    rows = []
    for (a, b), rec in sorted(collected.items(), key=lambda kv: (kv[1]["round"], kv[0])):
        t = rec["times"]
        lat = latency.get(tuple(sorted((a, b))))
        row = {"from": labels[a], "to": labels[b], "from_rank": a, "to_rank": b,
               "round": rec["round"], "bidirectional": bench.bidirectional, "size": bench.size,
               "bytes_moved": moved, "iterations": len(t), "time_us": median(t) * 1e6,
               "bandwidth_GBps": algbw(moved, median(t)),
               "min_GBps": algbw(moved, max(t)), "max_GBps": algbw(moved, min(t)),
               "per_iteration_us": [x * 1e6 for x in t],
               "latency_size": bench.latency_size if lat is not None else None,
               "latency_us": None if lat is None else lat * 1e6}
        v = verdicts.get((a, b))
        if v:
            row.update(vs_reference=1 / v["ratio"] if v["ratio"] else None,
                       slow_iterations=v["slow_iterations"],
                       slow=(a, b) in analysis["slow_links"])
        rows.append(row)
    return rows


def _fmt(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def report(out, bench, hosts, labels, ranks, collected, latency, threshold, matrix=True):
    """Rank 0: the matrices, the named links and hosts; everything into the JSON."""
    names = [labels[r] for r in ranks]
    times = {key: rec["times"] for key, rec in collected.items()}
    analysis = pairs.analyze(hosts, times, threshold)
    bw = _bandwidths(collected, bench)
    bw_m = _matrix(ranks, bw)
    lat_m = _matrix(ranks, _latency_values(latency))
    if matrix:
        out.say(f"#\n# bandwidth GB/s at {format_size(bench.size)}"
                + (" (both ways at once)" if bench.bidirectional else " (row sends to column)") + ":")
        _table(out, "GB/s" if bench.bidirectional else "from \\ to", names, bw_m, 3)
    if latency:
        out.say(f"#\n# latency us at {format_size(bench.latency_size)} (one way, half the round trip):")
        _table(out, "us", names, lat_m, 1)
    p2p = {"hosts": names, "size": bench.size, "bidirectional": bench.bidirectional,
           "bandwidth_GBps": bw_m}
    if latency:
        p2p.update(latency_size=bench.latency_size, latency_us=lat_m)
    out.set(p2p=p2p, links=_links(labels, collected, latency, bench, analysis),
            p2p_analysis=_jsonable(analysis, labels))
    for line in verdict_lines(analysis, hosts, labels, bw, _moved(bench)):
        out.say(line)
    return analysis


def _table(out, corner, names, matrix, digits):
    rows = [[n] + ["-" if a == b else _fmt(v, digits) for b, v in zip(names, row)]
            for n, row, a in zip(names, matrix, names)]
    for line in tabulate(rows, headers=[corner] + names, disable_numparse=True,
                         stralign="right").splitlines():
        out.say("#  " + line)


def verdict_lines(analysis, hosts, labels, bw, moved):
    """The named links and hosts, one line each, or one line saying none is slow."""
    pct = int(round(analysis["threshold"] * 100))
    k = analysis["iterations"]
    lines = ["#"]
    if analysis.get("reference_s"):
        lines.append(f"# reference: the median link between hosts not found slow, "
                     f"{moved / analysis['reference_s'] / 1e9:.3f} GB/s")
    verdicts = {(x["from"], x["to"]): x for x in analysis["links"]}
    explained = set()
    for h in analysis["slow_hosts"]:
        v = next(x for x in analysis["hosts"] if x["host"] == h)
        lines.append(f"# SLOW HOST {h}: its links run at {1 / v['ratio']:.2f}x the links "
                     f"between other hosts, below {pct}% in {v['slow_iterations']} of {k} iterations")
        mine = [key for key in analysis["slow_links"] if h in (hosts[key[0]], hosts[key[1]])]
        explained.update(mine)
        if mine:
            lines.append("#   its slow links (GB/s): " + ", ".join(
                f"{labels[a]} -> {labels[b]} {bw[(a, b)]:.3f}" for a, b in mine))
    for a, b in analysis["slow_links"]:
        if (a, b) in explained:
            continue
        v = verdicts[(a, b)]
        lines.append(f"# SLOW LINK {labels[a]} -> {labels[b]}: {bw[(a, b)]:.3f} GB/s, "
                     f"{1 / v['ratio']:.2f}x the reference, below {pct}% of it in "
                     f"{v['slow_iterations']} of {k} iterations")
    if not analysis["slow_links"] and not analysis["slow_hosts"]:
        lines.append(f"# no link or host is consistently below {pct}% of the others "
                     f"({k} iterations each)")
    if analysis["note"]:
        lines.append(f"# note: {analysis['note']}")
    return lines


def _jsonable(analysis, labels):
    doc = dict(analysis)
    doc["slow_links"] = [{"from": labels[a], "to": labels[b], "from_rank": a, "to_rank": b}
                         for a, b in analysis["slow_links"]]
    doc["links"] = [dict(x, from_label=labels[x["from"]], to_label=labels[x["to"]])
                    for x in analysis["links"]]
    return doc

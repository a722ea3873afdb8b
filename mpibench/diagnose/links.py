"""The links between hosts: every pair of ranks in round-robin rounds (pairs.schedule), each
timed with PairBench; the bandwidth and latency matrices, and the slow links and hosts named
(pairs.analyze). `p2p` measures this way; `run` ends with link_check, the same bandwidth-only."""
from statistics import median

from tabulate import tabulate

from ..measure.collectives.base import algbw
from ..measure.p2p import PairBench
from ..measure.sizes import format_size
from ..results.numbers import figure
from . import pairs

CPU_SIZE = 4 << 20
GPU_SIZE = 256 << 20


def default_size(backend):
    return GPU_SIZE if backend.cuda else CPU_SIZE


def measure(session, bench, rounds, labels, out, with_latency):
    """Every round on every rank; rank 0 collects each round as it ends (and saves it)."""
    collected, latency = {}, {}
    for k, rnd in enumerate(rounds):
        session.watch.arm(f"pairs of hosts: round {k + 1} of {len(rounds)}")
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
    bench = PairBench(session, backend, size, iters=iters, warmup=warmup, bidirectional=False)
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


def _collect(gathered, round_index, collected, latency):
    """Per link: per-iteration seconds, the slower of its two ends in each iteration."""
    for records in gathered:
        for rec in records:
            if rec["latency_s"] is not None:
                latency[tuple(sorted((rec["from"], rec["to"])))] = rec["latency_s"]
    for key, times in pairs.slower_end(gathered).items():
        collected[key] = {"round": round_index, "times": times}


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


def bandwidth_matrix(ranks, collected, bench):
    """GB/s of every link, row sends to column (None on the diagonal)."""
    return _matrix(ranks, _bandwidths(collected, bench))


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
    rows = [[n] + ["-" if a == b else figure(v, f".{digits}f", missing="-") for b, v in zip(names, row)]
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

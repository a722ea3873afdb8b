"""The links between hosts (`p2p`, and `run`'s link_check, bandwidth only): every pair of
ranks in pairs.schedule's rounds timed with PairBench; the matrices, the slow links and hosts."""
from statistics import median
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..measure.collectives.base import algbw
from ..measure.p2p import PairBench
from ..results import linkstext
from . import pairs

if TYPE_CHECKING:
    from ..launch.session import Session
    from ..measure.backends.torchdist import TorchBackend
    from ..results.output import RunOutput

Pair = Tuple[int, int]
Latency = Dict[Tuple[int, ...], float]      # s, per pair of ranks, the lower first

CPU_SIZE = 4 << 20
GPU_SIZE = 256 << 20


def default_size(backend: "TorchBackend") -> int:
    return GPU_SIZE if backend.cuda else CPU_SIZE


def measure(session: "Session", bench: PairBench, rounds: Sequence[Sequence[Pair]], labels: Sequence[str],
            out: Optional["RunOutput"], with_latency: bool) -> Tuple[Dict[Pair, Dict[str, Any]], Latency]:
    """Every round on every rank; rank 0 collects each round as it ends (and saves it)."""
    collected: Dict[Pair, Dict[str, Any]] = {}
    latency: Latency = {}
    assert session.watch is not None
    for k, rnd in enumerate(rounds):
        session.watch.arm(f"pairs of hosts: round {k + 1} of {len(rounds)}")
        gathered = session.comm.gather(bench.run_round(rnd, with_latency), root=0)
        if session.rank == 0:
            assert out is not None and gathered is not None
            latency.update((tuple(sorted((rec["from"], rec["to"]))), rec["latency_s"])
                           for records in gathered for rec in records if rec["latency_s"] is not None)
            collected.update((key, {"round": k, "times": times})
                             for key, times in pairs.slower_end(gathered).items())
            out.set(links=_links(labels, collected, latency, bench, None))
    return collected, latency


def link_check(session: "Session", backend: "TorchBackend", out: Optional["RunOutput"], size: int, iters: int,
               warmup: int, threshold: float = 0.8) -> Optional[Dict[str, Any]]:
    """run's check of the links, one rank per host: collective times cannot say which link is
    slow (every rank waits for the slowest one); pairs can."""
    assert session.hosts is not None
    ranks = pairs.participants(session.hosts)
    if len(ranks) < 2 or iters == 0:
        return None
    size = min(size, default_size(backend))
    bench = PairBench(session, backend, size, iters=iters, warmup=warmup, bidirectional=False)
    session.agree(bench.allocate(session.rank in ranks), 1)
    rounds = pairs.schedule(ranks, session.hosts)
    if session.rank == 0:
        assert out is not None
        linkstext.intro(out, size, len(rounds), iters)
    collected, _ = measure(session, bench, rounds, session.hosts, out, with_latency=False)
    bench.send_buf = bench.recv_buf = None
    return report(out, bench, collected, hosts=session.hosts, labels=session.hosts, ranks=ranks, latency={},
                  threshold=threshold, matrix=len(ranks) <= 16) if session.rank == 0 else None


def _moved(bench: PairBench) -> int:
    """Bytes one timed transfer moves: both ways at once count twice (as osu_bibw)."""
    return 2 * bench.size if bench.bidirectional else bench.size


def _matrix(ranks: Sequence[int], values: Mapping[Pair, Optional[float]]) -> List[List[Optional[float]]]:
    return [[values.get((a, b)) for b in ranks] for a in ranks]


def _links(labels: Sequence[str], collected: Mapping[Pair, Mapping[str, Any]], latency: Latency,
           bench: PairBench, analysis: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    moved = _moved(bench)
    verdicts = {(x["from"], x["to"]): x for x in analysis["links"]} if analysis else {}
    rows = []
    for (a, b), rec in sorted(collected.items(), key=lambda kv: (kv[1]["round"], kv[0])):
        t, mid = rec["times"], median(rec["times"])
        lat = latency.get(tuple(sorted((a, b))))
        row = {"from": labels[a], "to": labels[b], "from_rank": a, "to_rank": b,
               "round": rec["round"], "bidirectional": bench.bidirectional, "size": bench.size,
               "bytes_moved": moved, "iterations": len(t), "time_us": mid * 1e6,
               "bandwidth_GBps": algbw(moved, mid),
               "min_GBps": algbw(moved, max(t)), "max_GBps": algbw(moved, min(t)),
               "per_iteration_us": [x * 1e6 for x in t],
               "latency_size": bench.latency_size if lat is not None else None,
               "latency_us": None if lat is None else lat * 1e6}
        if v := verdicts.get((a, b)):
            assert analysis is not None
            row.update(vs_reference=1 / v["ratio"] if v["ratio"] else None,
                       slow_iterations=v["slow_iterations"],
                       slow=(a, b) in analysis["slow_links"])
        rows.append(row)
    return rows


def report(out: Optional["RunOutput"], bench: PairBench, collected: Mapping[Pair, Mapping[str, Any]], *,
           hosts: Sequence[str], labels: Sequence[str], ranks: Sequence[int], latency: Latency,
           threshold: float, matrix: bool = True) -> Dict[str, Any]:
    """Rank 0: the matrices, the named links and hosts; everything into the JSON."""
    assert out is not None
    names = [labels[r] for r in ranks]
    analysis = pairs.analyze(hosts, {key: rec["times"] for key, rec in collected.items()}, threshold)
    ways = 2 if bench.bidirectional else 1          # timed both ways at once: one figure for each
    bw = {k: algbw(_moved(bench), median(rec["times"]))
          for (a, b), rec in collected.items() for k in ((a, b), (b, a))[:ways]}
    bw_m = _matrix(ranks, bw)
    lat_m = _matrix(ranks, {k: s * 1e6 for (a, b), s in latency.items() for k in ((a, b), (b, a))})
    linkstext.matrices(out, names, bench.size, bench.bidirectional, bw_m if matrix else None,
                       bench.latency_size, lat_m if latency else None)
    p2p = {"hosts": names, "size": bench.size, "bidirectional": bench.bidirectional,
           "bandwidth_GBps": bw_m}
    if latency:
        p2p.update(latency_size=bench.latency_size, latency_us=lat_m)
    out.set(p2p=p2p, links=_links(labels, collected, latency, bench, analysis), p2p_analysis=dict(
        analysis, slow_links=[{"from": labels[a], "to": labels[b], "from_rank": a, "to_rank": b}
                              for a, b in analysis["slow_links"]],
        links=[dict(x, from_label=labels[x["from"]], to_label=labels[x["to"]]) for x in analysis["links"]]))
    linkstext.verdict(out, analysis, hosts, labels, bw, _moved(bench))
    return analysis

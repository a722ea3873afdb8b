"""What the classic commands (allreduce, latency, flagsync, demo) print and record: the units
their users know (GBps and Gbps, host:local_rank, milliseconds), and rows shaped as run's."""
import math
from statistics import mean
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..measure.collectives.all_gather import COLLECTIVE as ALL_GATHER
from ..measure.collectives.all_reduce import COLLECTIVE as ALL_REDUCE
from ..measure.collectives.base import algbw, busbw, Collective, Counts
from ..measure.dtypes import DType, DTYPES
from ..measure.sizes import format_size
from . import rows
from .numbers import counted, figure, ratio
from .output import RunOutput
from .tables import table

INT64 = DTYPES["int64"]
Records = Sequence[Dict[str, Any]]      # every rank's record (hostname, local_rank, ...)
Case = Tuple[Collective, Counts, str, str, int, List[int]]  # demo: coll, counts, mode, op, root, expected


TITLES = {"allreduce": "# mpibench allreduce: bandwidth of one all_reduce",       # each command's first line
          "latency": "# mpibench latency: one big all_reduce against many small ones",
          "flagsync": "# mpibench flagsync: three ways to sum a done flag",
          "demo": "# mpibench demo: collective semantics, rank r holds r"}


def labels(records: Records) -> List[str]:
    """host:local_rank of every rank, as the classic scripts print them."""
    return [f"{r['hostname']}:{r['local_rank']}" for r in records]


def bw_cells(value: Optional[float]) -> str:
    """'12.345 GBps (98.76 Gbps)', or n/a."""
    return "n/a" if value is None else f"{value:.3f} GBps ({value * 8:.2f} Gbps)"


def ms(seconds: float) -> str:
    """Milliseconds with four significant digits and no exponent."""
    value = seconds * 1e3
    digits = max(0, 3 - math.floor(math.log10(abs(value)))) if value else 3
    return f"{value:.{digits}f}"


def busbw_text(factor: float, formula: str = "") -> str:
    return (f"busbw = algbw x {factor:g}{formula}"
            + ("; with one rank busbw is not defined" if factor == 0 else ""))


# ---- allreduce: per-trial and per-rank bandwidth of one payload ----

def allreduce(out: RunOutput, records: Records, gathered: Sequence[Sequence[float]], *, backend: str,
              dt: DType, count: int, warmup: int) -> None:
    """gathered[r][k]: rank r's seconds in trial k."""
    factor = ALL_REDUCE.busbw_factor(n := len(gathered))
    nbytes, ntrials = count * dt.size, len(gathered[0])
    # One row of the document, in place: the median of the trials and their spread, as
    # run --trials writes it (every trial kept under the row's "trials").
    out.trials = rows.Collector()
    out.set(config={**out.doc["config"], "payload": nbytes, "count": count, "dtype": dt.name,
                    "trials": ntrials, "warmup": warmup, "busbw_factor": factor}, trials=ntrials)
    out.say(f"# {format_size(nbytes)} ({nbytes} bytes, {count} x {dt.name}) all_reduce on "
            f"{counted(n, 'rank')}, {warmup} warm-up, {ntrials} trials, {busbw_text(factor, ' (2(n-1)/n)')}")
    counts = ALL_REDUCE.counts(count, dt.size, n)
    good = []
    for k in range(ntrials):
        # nccl-tests' -a 1: the mean time over ranks, and algbw = size / that time
        row = rows.of_collective(ALL_REDUCE, counts, n, "in_place", [g[k] for g in gathered],
                                 backend=backend, dtype=dt, redop="sum")
        f = row["in_place"]
        good += [] if f["algbw_GBps"] is None else [f["algbw_GBps"]]
        out.add_row(row, f"trial {k + 1}: time {ms(f['time_us'] / 1e6)} ms  "
                         f"algbw {bw_cells(f['algbw_GBps'])}  busbw {bw_cells(f['busbw_GBps'])}")
    stats = {name: fn(good) if good else None for name, fn in (("mean", mean), ("min", min), ("max", max))}
    out.say("", table([[name, figure(v), figure(v and v * 8), figure(bus := busbw(v, factor)),
                        figure(bus and bus * 8)] for name, v in stats.items()],
                      ["over trials", "algbw GBps", "algbw Gbps", "busbw GBps", "busbw Gbps"]))
    means = [mean(g) for g in gathered]
    out.say("", table([[r, label, ms(t), figure(algbw(nbytes, t)), figure(busbw(algbw(nbytes, t), factor))]
                       for r, (label, t) in enumerate(zip(labels(records), means))],
                      ["rank", "host:local_rank", "mean ms", "algbw GBps", "busbw GBps"]))
    slow, fast = max(range(n), key=lambda r: means[r]), min(means)
    host, local = records[slow]["hostname"], records[slow]["local_rank"]
    out.say(f"\nslowest rank: {slow} on host {host} (local rank {local}): mean {ms(means[slow])} ms, "
            f"{means[slow] / fast:.2f}x the fastest rank" if fast > 0 else "")
    out.set(summary={"algbw_GBps": stats, "busbw_GBps": {k: busbw(v, factor) for k, v in stats.items()},
                     "per_rank_mean_time_us": [t * 1e6 for t in means], "slowest_rank": {
                         "rank": slow, "host": host, "local_rank": local, "mean_time_us": means[slow] * 1e6}})
    out.finish()


# ---- latency: 1 x S against K x S/K ----

def latency(out: RunOutput, records: Records, gathered: Sequence[Tuple[float, float]], *, backend: str,
            dt: DType, count: int, small: int, k: int, warmup: int, blocking: int) -> None:
    """gathered[r]: rank r's (seconds of the one call, seconds of the K calls together)."""
    factor = ALL_REDUCE.busbw_factor(n := len(gathered))
    big_bytes, small_bytes = count * dt.size, small * dt.size
    out.set(config={**out.doc["config"], "size": big_bytes, "k": k, "chunk": small_bytes,
                    "dtype": dt.name, "warmup": warmup, "blocking": blocking,
                    "busbw_factor": factor})
    out.say(f"# 1 x {format_size(big_bytes)} ({count} x {dt.name}) against {k} x "
            f"{format_size(small_bytes)} ({small} x {dt.name}, {small_bytes * k} bytes in all), "
            f"{counted(n, 'rank')}, {busbw_text(factor)}")
    # Two rows of the document, each per call as nccl-tests counts it: one of the K calls of
    # S/K bytes (the K calls' time over K), then the one call of S bytes: sizes rising, as
    # nccl-tests prints them, so the printed table reads back as one run.
    out.table_header(ALL_REDUCE.name)
    for x, calls, seconds in ((small, k, [g[1] / k for g in gathered]), (count, 1, [g[0] for g in gathered])):
        out.add_row(rows.of_collective(ALL_REDUCE, ALL_REDUCE.counts(x, dt.size, n), n, "in_place", seconds,
                                       backend=backend, dtype=dt, redop="sum", calls=calls))

    def row(rank: Optional[int], label: str, d1: float, dk: float) -> Dict[str, Any]:
        parts = {part: {"bytes": nbytes, "time_us": s * 1e6, "algbw_GBps": algbw(nbytes, s),
                        "busbw_GBps": busbw(algbw(nbytes, s), factor)}
                 for part, nbytes, s in (("one", big_bytes, d1), ("many", small_bytes * k, dk))}
        return {"collective": ALL_REDUCE.name, "backend": backend, "rank": rank, "label": label,
                **parts, "ratio": dk / d1 if d1 > 0 else None}
    per_rank = [row(r, label, *g) for r, (label, g) in enumerate(zip(labels(records), gathered))]
    def cells(p: Dict[str, Any]) -> List[str]:
        return [ms(p["time_us"] / 1e6), figure(p["algbw_GBps"]), figure(p["busbw_GBps"])]
    out.say("", table([[x["label"], x["rank"], *cells(x["one"]), *cells(x["many"]), figure(x["ratio"], ".2f")]
                       for x in per_rank], ["host:local_rank", "rank", "1xS ms", "algbw GBps", "busbw GBps",
                                            f"{k}xS/{k} ms", "algbw GBps", "busbw GBps", "ratio"]))
    d1, dk = mean(g[0] for g in gathered), mean(g[1] for g in gathered)
    avg = row(None, "mean", d1, dk)
    out.say(f"\nmean over ranks: 1 x {format_size(big_bytes)} {ms(d1)} ms, busbw "
            f"{bw_cells(avg['one']['busbw_GBps'])}; {k} x {format_size(small_bytes)} "
            f"{ms(dk)} ms, busbw {bw_cells(avg['many']['busbw_GBps'])}; "
            f"the small calls took {figure(avg['ratio'], '.2f')}x as long")
    out.set(per_rank=per_rank, summary=avg)
    out.finish()


# ---- flagsync: three ways to sum a done flag ----

def flagsync(out: RunOutput, records: Records, gathered: Sequence[Tuple[Sequence[float], Sequence[int]]], *,
             backend: str, names: Sequence[str], calls: int, warmup: int) -> Optional[str]:
    """gathered[r]: rank r's (seconds per call, sum) per method; the failure message or None."""
    n = len(gathered)
    expected = n * (n + 1) // 2
    per_call = [sum(g[0][i] for g in gathered) / n for i in range(len(names))]
    wrong = [(r, names[i], g[1][i]) for r, g in enumerate(gathered)
             for i in range(len(names)) if g[1][i] != expected]
    out.set(config={**out.doc["config"], "calls": calls, "warmup": warmup, "expected_sum": expected})
    out.say(f"# {calls} calls of each on {counted(n, 'rank')} ({backend}); "
            f"rank r's flag is r+1, so every method must sum to {expected}")
    lines = []
    for i, name in enumerate(names):
        times, sums = [g[0][i] for g in gathered], [g[1][i] for g in gathered]
        speedup = per_call[0] / per_call[i] if per_call[i] > 0 else None
        # all_gather_object moves a pickled int of no fixed size: its time stands alone
        coll = {ALL_GATHER.name: ALL_GATHER, ALL_REDUCE.name: ALL_REDUCE}.get(name)
        c = Counts(1, n, 1, 1, 0) if coll is ALL_GATHER else Counts(1, 1, 1, 0, 0)
        row = rows.one_mode(
            name, "in_place" if coll is ALL_REDUCE else "out_of_place", times, backend=backend, dtype=INT64,
            size=max(c.send, c.recv) * INT64.size, count=1, redop="sum" if coll is ALL_REDUCE else "none",
            bw_bytes=coll.bw_bytes(c, INT64.size, n) if coll else None, method=name, calls=calls, sums=sums,
            factor=coll.busbw_factor(n) if coll else 0.0, wrong=[0 if s == expected else 1 for s in sums],
            time_per_call_us=per_call[i] * 1e6, total_s=per_call[i] * calls, agrees=set(sums) == {expected},
            slowest_rank_time_per_call_us=max(times) * 1e6, speedup_vs_all_gather_object=speedup)
        out.record_row(row)
        lines.append([name, f"{row['total_s']:.4f}", f"{row['time_per_call_us']:.1f}",
                      f"{row['slowest_rank_time_per_call_us']:.1f}", ratio(speedup, missing="n/a"),
                      ",".join(str(s) for s in sorted(set(sums))), "yes" if row["agrees"] else "NO"])
    out.say(table(lines, ["method", "total s (mean rank)", "us/call (mean rank)", "us/call (slowest rank)",
                          "speedup vs all_gather_object", "sum", "agrees"]))
    out.set(agree=not wrong)
    out.finish()
    if wrong:
        r, name, got = wrong[0]
        return (f"FAILED: {name} summed the flags to {got} on rank {r} "
                f"(host {records[r]['hostname']}), expected {expected}")
    out.say(f"\nall methods agree: the flags sum to {expected} on every rank")
    return None


# ---- demo: rank r holds r ----

def demo(out: RunOutput, records: Records, gathered: Sequence[Sequence[Tuple[List[int], List[int], float]]],
         *, backend: str, cases: Sequence[Case]) -> Optional[str]:
    """gathered[r][i]: rank r's (before, after, seconds) of cases[i]; the failure message or None."""
    n, failed = len(gathered), []     # failed: (collective, rank)
    out.say(f"# {counted(n, 'rank')} on {backend}; rank r holds r")
    for i, (coll, counts, mode, op, root, expected) in enumerate(cases):
        held: List[Dict[str, Any]] = [
            {"rank": r, "label": label, "before": g[i][0], "after": g[i][1], "pass": g[i][1] == expected}
            for r, (label, g) in enumerate(zip(labels(records), gathered))]
        failed += [(coll.name, x["rank"]) for x in held if not x["pass"]]
        verdict = "PASS" if all(x["pass"] for x in held) else "FAIL"
        out.say(f"\n{coll.name}: expected {_show(expected)} on every rank: {verdict}",
                table([[x["rank"], x["label"], _show(x["before"]), _show(x["after"]),
                        "PASS" if x["pass"] else "FAIL"] for x in held],
                      ["rank", "host:local_rank", "before", "after", ""]))
        # The row's time is that of this one first call (connection set-up included): the
        # demo checks results, it is no benchmark.
        out.record_row(rows.of_collective(
            coll, counts, n, mode, [g[i][2] for g in gathered], backend=backend, dtype=INT64, redop=op,
            root=root, wrong=[_wrong(g[i][1], expected) for g in gathered], expected=expected,
            ranks=held, **{"pass": verdict == "PASS"}))
    out.set(passed=not failed)
    out.finish()
    if failed:
        colls = sorted({c for c, _ in failed}, key=[c[0].name for c in cases].index)
        name, rank = failed[0]
        return (f"demo FAILED: {', '.join(colls)} (first: {name} on rank {rank}, host "
                f"{records[rank]['hostname']})")
    out.say(f"\ndemo: all {len(cases)} collectives PASS on {counted(n, 'rank')}")
    return None


def _wrong(got: List[int], expected: List[int]) -> int:
    """Elements of got that differ from expected (a missing or extra element counts)."""
    return sum(a != b for a, b in zip(got, expected)) + abs(len(got) - len(expected))


def _show(values: List[int]) -> str:
    return str(values[0]) if len(values) == 1 else str(values)

"""The text of a train run as train prints it and report renders it."""
from typing import Any, Dict, List, Optional

from ..measure.sizes import format_bytes, format_size
from . import numbers
from .schema import HostAnalysis
from .tables import commented, host_cells, slow_host_lines


def replicas_line(train: Dict[str, Any]) -> str:
    rep = train["replicas"]
    losses = rep["loss"]
    rtol = rep.get("rtol") or 0.0
    allowed = f"within {rtol:.0%} ({train.get('precision')})" if rtol else "bit for bit"
    if rep["agree"]:
        spread = f", spread {rep['spread']:.2g}" if rtol else ""
        return (f"#  replicas             : agree {allowed}{spread}, loss {losses[0]:.6f} "
                f"on a shared batch on every rank")
    return (f"#  replicas             : DIFFER (allowed: {allowed}): losses on a shared batch "
            + ", ".join("not finite" if x is None else f"{x:.6f}" for x in losses))


STEP_HEADER = "#   step   synced (ms)   unsynced (ms)   exposed (ms)   mean loss"


def step_line(rec: Dict[str, Any]) -> str:
    synced = max(rec["synced_s"]) if rec.get("synced_s") else None
    unsynced = max(rec["unsynced_s"])
    exposed = None if synced is None else synced - unsynced
    loss = "NOT FINITE" if None in rec["loss"] else f"{sum(rec['loss']) / len(rec['loss']):.4f}"
    return (f"  {rec['step']:5d}  {numbers.ms(synced):>12s}  {numbers.ms(unsynced):>14s}  "
            f"{numbers.ms(exposed):>13s}  {loss:>10s}")


def steps_title(train: Dict[str, Any]) -> str:
    if train["parallel"] == "none":
        return ("#\n# timed steps, each rank alone (--parallel none: no gradient "
                "synchronisation); time per step of the slowest rank")
    ref = ("DDP's no_sync" if train["parallel"] == "ddp" else
           "an unsharded copy of the model, each rank alone")
    return (f"#\n# timed steps, synced and unsynced ({ref}) alternated on the same ranks; "
            f"time per step of the slowest rank")


def summary_lines(train: Dict[str, Any], n: int) -> List[str]:
    """The summary block train prints (and report reprints)."""
    s = train.get("summary")
    if not s:
        return ["# no summary: the run ended before its timed steps were done"]
    m = train["model"]
    lines = ["#", f"# summary over {numbers.counted(len(train['steps']), 'timed step')} (medians; "
                  f"{numbers.counted(n, 'rank')} x batch {train['batch_per_rank']} x seq {m['seq']}):",
             f"#  step time            : {numbers.ms(s['step_s'])} ms",
             f"#  throughput           : {s['tokens_per_s']:.1f} tokens/s, "
             f"{s['samples_per_s']:.2f} samples/s (the job)"]
    if s.get("exposed_s") is not None:
        lines += [f"#  compute alone        : {numbers.ms(s['compute_s'])} ms (unsynced steps)",
                  f"#  exposed comm         : {numbers.ms(s['exposed_s'])} ms, "
                  f"{numbers.pct(s['exposed_share'])} of the step"]
    if s.get("gradient_bytes"):
        lines.append(f"#  gradients synced     : {format_bytes(s['gradient_bytes'])} per step "
                     f"({format_bytes(round(s['bus_bytes']))} over the bus)")
    if s.get("alone_s") is not None:
        lines += [f"#  collectives alone    : {numbers.ms(s['alone_s'])} ms back to back, "
                  f"busbw {numbers.figure(s['busbw_GBps'], unit=' GB/s')}",
                  f"#  hidden by compute    : {numbers.pct(s['hidden_share'])} of the "
                  f"communication (1 - exposed / alone)"]
    if train.get("replicas"):
        lines.append(replicas_line(train))
    if mem := [m for m in train.get("memory") or [] if m.get("peak_bytes") is not None]:
        top = max(mem, key=lambda m: m["peak_bytes"])
        what = ("CUDA max_memory_allocated" if train.get("memory_kind") == "cuda_max_memory_allocated"
                else "growth of the peak resident set from before the model was built")
        lines.append(f"#  peak memory          : {format_bytes(top['peak_bytes'])} on rank "
                     f"{top['rank']} (host {top['host']}), {what}")
    if sc := train.get("scaling"):
        lines.append(f"# scaling: {sc['speedup']:.2f}x on {sc['rank_ratio']:g}x the ranks: efficiency "
                     f"{sc['efficiency']:.2f} (baseline {numbers.counted(sc['baseline_ranks'], 'rank')} "
                     f"on {numbers.counted(sc['baseline_hosts'], 'host')}, "
                     f"{sc['baseline_tokens_per_s']:.1f} tokens/s)")
    return lines


def header_line(train: Dict[str, Any]) -> str:
    m = train["model"]
    bucket = f" (buckets of {train['bucket_mb']:g} MiB)" if train["parallel"] == "ddp" else ""
    return (f"# mpibench train: model {m['preset']} ({m['parameters'] / 1e6:.1f}M parameters: "
            f"{m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads, seq {m['seq']}, "
            f"vocab {m['vocab']}), parallel {train['parallel']}{bucket}, batch "
            f"{train['batch_per_rank']} per rank, {train['precision']}, "
            f"{numbers.counted(train['warmup'], 'warm-up step')} and {train['timed']} timed")


def watchdog_line(timeout: float) -> str:
    return f"# watchdog: a step that takes over {timeout:g} s is called hung (--timeout)"


def alone_title(iters: int) -> str:
    return ("#\n# the step's collectives timed alone, back to back, through the engine on "
            f"the same process group ({iters} iterations after {min(2, iters)} warm-ups)")


def text(doc: Dict[str, Any]) -> List[str]:
    """What report prints for a train document (its rows are printed as run's)."""
    train = doc["train"]
    return ([header_line(train), steps_title(train), STEP_HEADER] + [step_line(r) for r in train["steps"]]
            + closing_lines(train, (doc.get("world") or {}).get("size") or 1))


def closing_lines(train: Dict[str, Any], n: int) -> List[str]:
    """What follows the steps: one step's collectives, the step times per host, the summary."""
    calls = train.get("collectives") or []
    lines = ["# one step's collectives: " + ", ".join(
        f"{c['count']} x {c['collective']} {format_size(c['size'])}" for c in calls)] if calls else []
    hosts: Optional[HostAnalysis] = train.get("hosts")
    if hosts:
        rows = [host_cells(h, numbers.ms) + [numbers.ratio(h["ratio"])] for h in hosts["hosts"]]
        lines.append(f"#\n# {'synced' if train['parallel'] != 'none' else 'compute'} step time per "
                     f"host ({hosts['iterations']} steps, median per rank):")
        lines += commented(rows, ["host", "ranks", "min ms", "median ms", "max ms", "vs median host"])
        s = hosts["slowest"]
        if len(hosts["ranks"]) > 1:
            ratio = "" if s["ratio"] is None else f", {s['ratio']:.2f}x the median rank"
            lines.append(f"# slowest rank: rank {s['rank']} (host {s['host']}) "
                         f"{numbers.ms(s['median_s'])} ms{ratio}")
        lines += slow_host_lines(hosts, "steps")
        if hosts["slow_ranks"]:
            lines.append("# consistently slow ranks: " + ", ".join(
                f"{r} ({hosts['ranks'][r]['host']})" for r in hosts["slow_ranks"]))
    return lines + summary_lines(train, n)


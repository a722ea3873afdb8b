"""The `train` part of a results document: its figures from the timed steps, its checks
when read back, and its text as train prints it and report renders it.

    doc["train"] = {"model": {"preset", "layers", "hidden", "heads", "seq", "vocab",
                              "parameters"},
                    "parallel": "ddp" | "fsdp" | "none", "bucket_mb", "batch_per_rank",
                    "precision", "warmup",
                    "steps": [{"step", "synced_s": [per rank] | null,
                               "unsynced_s": [per rank], "loss": [per rank]}],
                    "collectives": [{"collective", "size", "count"}],   # one step's calls
                    "summary": {...} | null,   # figures() below, once the steps are done
                    "hosts": stragglers.analyze() of the step times | null,
                    "memory": [{"rank", "host", "peak_bytes"}], "memory_kind",
                    "replicas": {"loss": [per rank], "agree": bool, "rtol": float,
                                 "spread": float | null} | null,
                    "scaling": {...} | null}   # against --scale-from
Times are seconds; a job's step time is its slowest rank's, per step, then the median.
"""
from statistics import median

from tabulate import tabulate

from ..measure.collectives import REGISTRY
from ..measure.sizes import format_bytes, format_size
from .document import finite

SUMMARY_NUMBERS = ("step_s", "compute_s", "tokens_per_s", "samples_per_s")


def replicas(losses, rtol):
    """The replicas' check: every rank's loss on a shared batch, equal (rtol 0) or within
    rtol of the largest in size; spread is (max - min) / max |loss|."""
    if None in losses:
        return {"loss": losses, "agree": False, "rtol": rtol, "spread": None}
    top = max(abs(x) for x in losses)
    spread = (max(losses) - min(losses)) / top if top else 0.0
    agree = len(set(losses)) == 1 if not rtol else spread <= rtol
    return {"loss": losses, "agree": agree, "rtol": rtol, "spread": spread}


def replicas_line(train):
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


def job_times(steps, kind):
    """The job's time per step (its slowest rank), for kind 'synced_s' or 'unsynced_s'."""
    return [max(s[kind]) for s in steps if s.get(kind)]


def figures(train, n, alone):
    """The summary of the timed steps. alone: {(collective, size): seconds} of the step's
    collectives timed alone (empty when not timed)."""
    steps = train["steps"]
    synced, unsynced = job_times(steps, "synced_s"), job_times(steps, "unsynced_s")
    step = median(synced) if synced else median(unsynced)
    compute = median(unsynced)
    m = train["model"]
    out = {"step_s": step, "compute_s": compute,
           "tokens_per_s": n * train["batch_per_rank"] * m["seq"] / step,
           "samples_per_s": n * train["batch_per_rank"] / step,
           "exposed_s": None, "exposed_share": None, "alone_s": None, "hidden_share": None,
           "gradient_bytes": None, "bus_bytes": None, "busbw_GBps": None}
    if synced:
        # A/B pairs on the same ranks: the median of the differences, not of each side.
        exposed = median(a - b for a, b in zip(synced, unsynced))
        out.update(exposed_s=exposed, exposed_share=exposed / step)
    calls = train.get("collectives") or []
    if calls:
        reduced = [c for c in calls if c["collective"] in ("all_reduce", "reduce_scatter")]
        out["gradient_bytes"] = sum(c["size"] * c["count"] for c in reduced)
        out["bus_bytes"] = sum(c["size"] * c["count"] * REGISTRY[c["collective"]].busbw_factor(n)
                               for c in calls)
    if calls and alone and all((c["collective"], c["size"]) in alone for c in calls):
        total = sum(alone[(c["collective"], c["size"])] * c["count"] for c in calls)
        out["alone_s"] = total
        out["busbw_GBps"] = out["bus_bytes"] / total / 1e9 if total > 0 else None
        if out["exposed_s"] is not None and total > 0:
            out["hidden_share"] = 1 - out["exposed_s"] / total
    return out


def scaling(summary, n, base_doc):
    """Speedup and efficiency of this run against a baseline train document."""
    base = base_doc["train"]["summary"]
    base_n = base_doc["world"]["size"]
    speedup = summary["tokens_per_s"] / base["tokens_per_s"]
    ratio = n / base_n
    return {"baseline_ranks": base_n, "baseline_hosts": len(base_doc["world"].get("hosts") or []),
            "baseline_tokens_per_s": base["tokens_per_s"], "speedup": speedup,
            "rank_ratio": ratio, "efficiency": speedup / ratio}


# ---- text ----
def _ms(seconds):
    return "n/a" if seconds is None else f"{seconds * 1e3:.1f}"


def _pct(share):
    return "n/a" if share is None else f"{share * 100:.1f}%"


STEP_HEADER = "#   step   synced (ms)   unsynced (ms)   exposed (ms)   mean loss"


def step_line(rec):
    synced = max(rec["synced_s"]) if rec.get("synced_s") else None
    unsynced = max(rec["unsynced_s"])
    exposed = None if synced is None else synced - unsynced
    loss = ("NOT FINITE" if None in rec["loss"] else
             f"{sum(rec['loss']) / len(rec['loss']):.4f}")
    return (f"  {rec['step']:5d}  {_ms(synced):>12s}  {_ms(unsynced):>14s}  {_ms(exposed):>13s}"
            f"  {loss:>10s}")


def steps_title(train):
    if train["parallel"] == "none":
        return ("#\n# timed steps, each rank alone (--parallel none: no gradient "
                "synchronisation); time per step of the slowest rank")
    ref = ("DDP's no_sync" if train["parallel"] == "ddp" else
           "an unsharded copy of the model, each rank alone")
    return (f"#\n# timed steps, synced and unsynced ({ref}) alternated on the same ranks; "
            f"time per step of the slowest rank")


def summary_lines(train, n):
    """The summary block train prints (and report reprints)."""
    s = train.get("summary")
    if not s:
        return ["# no summary: the run ended before its timed steps were done"]
    m = train["model"]
    steps = len(train["steps"])
    lines = ["#", f"# summary over {steps} timed step{'s' if steps != 1 else ''} "
                  f"(medians; {n} rank{'s' if n != 1 else ''} x batch "
                  f"{train['batch_per_rank']} x seq {m['seq']}):",
             f"#  step time            : {_ms(s['step_s'])} ms",
             f"#  throughput           : {s['tokens_per_s']:.1f} tokens/s, "
             f"{s['samples_per_s']:.2f} samples/s (the job)"]
    if s.get("exposed_s") is not None:
        lines += [f"#  compute alone        : {_ms(s['compute_s'])} ms (unsynced steps)",
                  f"#  exposed comm         : {_ms(s['exposed_s'])} ms, "
                  f"{_pct(s['exposed_share'])} of the step"]
    if s.get("gradient_bytes"):
        lines.append(f"#  gradients synced     : {format_bytes(s['gradient_bytes'])} per step "
                     f"({format_bytes(round(s['bus_bytes']))} over the bus)")
    if s.get("alone_s") is not None:
        bw = "n/a" if s["busbw_GBps"] is None else f"{s['busbw_GBps']:.3f} GB/s"
        lines += [f"#  collectives alone    : {_ms(s['alone_s'])} ms back to back, busbw {bw}",
                  f"#  hidden by compute    : {_pct(s['hidden_share'])} of the "
                  f"communication (1 - exposed / alone)"]
    if train.get("replicas"):
        lines.append(replicas_line(train))
    lines += memory_lines(train)
    sc = train.get("scaling")
    if sc:
        lines.append("# " + scaling_line(sc))
    return lines


def scaling_line(sc):
    """The seed's '1.70x on 2x the GPUs' as one line."""
    return (f"scaling: {sc['speedup']:.2f}x on {sc['rank_ratio']:g}x the ranks: efficiency "
            f"{sc['efficiency']:.2f} (baseline {sc['baseline_ranks']} rank"
            f"{'s' if sc['baseline_ranks'] != 1 else ''} on {sc['baseline_hosts']} host"
            f"{'s' if sc['baseline_hosts'] != 1 else ''}, "
            f"{sc['baseline_tokens_per_s']:.1f} tokens/s)")


def memory_lines(train):
    mem = [m for m in train.get("memory") or [] if m.get("peak_bytes") is not None]
    if not mem:
        return []
    top = max(mem, key=lambda m: m["peak_bytes"])
    what = ("CUDA max_memory_allocated" if train.get("memory_kind") == "cuda_max_memory_allocated"
            else "growth of the peak resident set from before the model was built")
    return [f"#  peak memory          : {format_bytes(top['peak_bytes'])} on rank {top['rank']} "
            f"(host {top['host']}), {what}"]


def host_lines(analysis, kind):
    """Per host: its ranks' step times; the slowest rank and consistently slow hosts."""
    rows = [[h["host"], ",".join(str(r) for r in h["ranks"]), _ms(h["min_s"]),
             _ms(h["median_s"]), _ms(h["max_s"]),
             "-" if h["ratio"] is None else f"{h['ratio']:.2f}x"] for h in analysis["hosts"]]
    table = tabulate(rows, headers=["host", "ranks", "min ms", "median ms", "max ms",
                                    "vs median host"], disable_numparse=True)
    lines = [f"#\n# {kind} step time per host ({analysis['iterations']} steps, median per rank):"]
    lines += ["#  " + line for line in table.splitlines()]
    s = analysis["slowest"]
    if len(analysis["ranks"]) > 1:
        ratio = "" if s["ratio"] is None else f", {s['ratio']:.2f}x the median rank"
        lines.append(f"# slowest rank: rank {s['rank']} (host {s['host']}) {_ms(s['median_s'])} "
                     f"ms{ratio}")
    pct = int(round(analysis["margin"] * 100))
    for name in analysis["slow_hosts"]:
        h = next(x for x in analysis["hosts"] if x["host"] == name)
        lines.append(f"# SLOW HOST {name}: more than {pct}% over the median host in "
                     f"{h['slow_iterations']} of {analysis['iterations']} steps "
                     f"({h['ratio']:.2f}x)")
    if analysis["slow_ranks"]:
        lines.append("# consistently slow ranks: " + ", ".join(
            f"{r} ({analysis['ranks'][r]['host']})" for r in analysis["slow_ranks"]))
    return lines


def header_line(train):
    m = train["model"]
    bucket = f" (buckets of {train['bucket_mb']:g} MiB)" if train["parallel"] == "ddp" else ""
    return (f"# mpibench train: model {m['preset']} ({m['parameters'] / 1e6:.1f}M parameters: "
            f"{m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads, seq {m['seq']}, "
            f"vocab {m['vocab']}), parallel {train['parallel']}{bucket}, batch "
            f"{train['batch_per_rank']} per rank, {train['precision']}, {train['warmup']} "
            f"warm-up step{'s' if train['warmup'] != 1 else ''} and {train['timed']} timed")


def calls_line(train):
    calls = train.get("collectives") or []
    if not calls:
        return None
    parts = [f"{c['count']} x {c['collective']} {format_size(c['size'])}" for c in calls]
    return f"# one step's collectives: {', '.join(parts)}"


def text(doc):
    """What report prints for a train document (its rows are printed as run's)."""
    train = doc["train"]
    n = (doc.get("world") or {}).get("size") or 1
    lines = [header_line(train), steps_title(train), STEP_HEADER]
    lines += [step_line(r) for r in train["steps"]]
    call = calls_line(train)
    if call:
        lines.append(call)
    if train.get("hosts"):
        lines += host_lines(train["hosts"], "synced" if train["parallel"] != "none" else "compute")
    return lines + summary_lines(train, n)


# ---- reading back ----
def problem(doc):
    """What is wrong with a document's train part (None: nothing, or no train part)."""
    train = doc.get("train")
    if train is None:
        return "no 'train' part (not a train result)" if doc.get("command") == "train" else None
    if not isinstance(train, dict):
        return "train is not an object"
    m = train.get("model")
    if not (isinstance(m, dict) and isinstance(m.get("preset"), str) and all(
            isinstance(m.get(k), int) and not isinstance(m.get(k), bool) and m[k] >= 1
            for k in ("layers", "hidden", "heads", "seq", "vocab", "parameters"))):
        return "train.model is malformed"
    if train.get("parallel") not in ("ddp", "fsdp", "none"):
        return "train.parallel is not ddp, fsdp or none"
    if not (isinstance(train.get("batch_per_rank"), int) and train["batch_per_rank"] >= 1):
        return "train.batch_per_rank is not a batch size"
    steps = train.get("steps")
    if not isinstance(steps, list):
        return "train.steps is not a list"
    for i, s in enumerate(steps):
        if not (isinstance(s, dict) and isinstance(s.get("step"), int)
                and all(isinstance(s.get(k), list) and s[k] and all(finite(x, 0) for x in s[k])
                        for k in ("unsynced_s",))
                and (s.get("synced_s") is None or (isinstance(s["synced_s"], list) and all(
                    finite(x, 0) for x in s["synced_s"])))
                and isinstance(s.get("loss"), list)
                and all(x is None or finite(x) for x in s["loss"])):
            return f"train.steps[{i}] is malformed"
    summary = train.get("summary")
    if summary is not None:
        if not (isinstance(summary, dict) and all(finite(summary.get(k), 0) and summary[k] > 0
                                                  for k in SUMMARY_NUMBERS)):
            return "train.summary is malformed"
        for k in ("exposed_s", "exposed_share", "alone_s", "hidden_share", "busbw_GBps"):
            if summary.get(k) is not None and not finite(summary[k]):
                return f"train.summary.{k} is not a number"
    return None


def comparison(named_docs):
    """compare's lines for train documents (each file's step time, throughput and exposed
    share), and every other file's throughput over the first file's."""
    base = named_docs[0][1]["train"]["summary"]
    rows, ratios = [], []
    for path, doc in named_docs:
        t, s = doc["train"], doc["train"]["summary"]
        world = doc.get("world") or {}
        rows.append([path, t["model"]["preset"], t["parallel"], world.get("size", "?"),
                     len(world.get("hosts") or []), _ms(s["step_s"]),
                     f"{s['tokens_per_s']:.1f}", _pct(s.get("exposed_share")),
                     _pct(s.get("hidden_share")),
                     f"{s['tokens_per_s'] / base['tokens_per_s']:.3f}"])
        ratios.append(s["tokens_per_s"] / base["tokens_per_s"])
    table = tabulate(rows, headers=["file", "model", "parallel", "ranks", "hosts", "step ms",
                                    "tokens/s", "exposed", "hidden", "vs base"],
                     disable_numparse=True)
    lines = ["# train: throughput against the first file"] + ["#  " + x for x in table.splitlines()]
    return lines, ratios[1:]


def sweep_lines(records, labels):
    """sweep's table of the train steps per setting (none when no setting trained)."""
    rows = [[labels[r["setting"]], _ms(t["step_s"]), f"{t['tokens_per_s']:.1f}",
             _pct(t.get("exposed_share")), _pct(t.get("hidden_share"))]
            for r in records for t in [r.get("train")] if t]
    if not rows:
        return []
    table = tabulate(rows, headers=["setting", "step ms", "tokens/s", "exposed", "hidden"],
                     disable_numparse=True)
    return ["#\n# train steps per setting"] + ["#  " + x for x in table.splitlines()]

"""A train run's figures (train.summary), replicas' check and scaling against a baseline, in
seconds; a job's step time is its slowest rank's, per step, then the median."""
from statistics import median
from typing import Any, Dict, List, Literal, Optional, Tuple

from ..measure.collectives import REGISTRY
from .schema import Step, Train


def replicas(losses: List[Optional[float]], rtol: float) -> Dict[str, Any]:
    """The replicas' check: every rank's loss on a shared batch, equal (rtol 0) or within
    rtol of the largest in size; spread is (max - min) / max |loss|."""
    known = [x for x in losses if x is not None]
    if len(known) != len(losses):
        return {"loss": losses, "agree": False, "rtol": rtol, "spread": None}
    top = max(abs(x) for x in known)
    spread = (max(known) - min(known)) / top if top else 0.0
    agree = len(set(known)) == 1 if not rtol else spread <= rtol
    return {"loss": losses, "agree": agree, "rtol": rtol, "spread": spread}


def job_times(steps: List[Step], kind: Literal["synced_s", "unsynced_s"]) -> List[float]:
    """The job's time per step (its slowest rank), for kind 'synced_s' or 'unsynced_s'."""
    return [max(times) for s in steps if (times := s.get(kind))]


def figures(train: Train, n: int, alone: Dict[Tuple[str, int], float]) -> Dict[str, Any]:
    """The summary of the timed steps; alone: {(collective, size): s} of its calls timed alone."""
    synced, unsynced = job_times(train["steps"], "synced_s"), job_times(train["steps"], "unsynced_s")
    step = median(synced or unsynced)
    samples = n * train["batch_per_rank"]       # the job's per step
    out: Dict[str, Any] = {"step_s": step, "compute_s": median(unsynced),
                           "tokens_per_s": samples * train["model"]["seq"] / step,
                           "samples_per_s": samples / step,
                           **dict.fromkeys(("exposed_s", "exposed_share", "alone_s", "hidden_share",
                                            "gradient_bytes", "bus_bytes", "busbw_GBps"))}
    if synced:
        # A/B pairs on the same ranks: the median of the differences, not of each side.
        exposed = median(a - b for a, b in zip(synced, unsynced))
        out.update(exposed_s=exposed, exposed_share=exposed / step)
    calls = train.get("collectives") or []
    if calls:
        out["gradient_bytes"] = sum(c["size"] * c["count"] for c in calls
                                    if c["collective"] in ("all_reduce", "reduce_scatter"))
        out["bus_bytes"] = sum(c["size"] * c["count"] * REGISTRY[c["collective"]].busbw_factor(n)
                               for c in calls)
    if calls and alone and all((c["collective"], c["size"]) in alone for c in calls):
        total = sum(alone[(c["collective"], c["size"])] * c["count"] for c in calls)
        out.update(alone_s=total, busbw_GBps=out["bus_bytes"] / total / 1e9 if total > 0 else None)
        if out["exposed_s"] is not None and total > 0:
            out["hidden_share"] = 1 - out["exposed_s"] / total
    return out


def scaling(summary: Dict[str, Any], n: int, base_doc: Dict[str, Any]) -> Dict[str, Any]:
    """Speedup and efficiency of this run against a baseline train document."""
    base = base_doc["train"]["summary"]
    base_n = base_doc["world"]["size"]
    speedup = summary["tokens_per_s"] / base["tokens_per_s"]
    ratio = n / base_n
    return {"baseline_ranks": base_n, "baseline_hosts": len(base_doc["world"].get("hosts") or []),
            "baseline_tokens_per_s": base["tokens_per_s"], "speedup": speedup,
            "rank_ratio": ratio, "efficiency": speedup / ratio}

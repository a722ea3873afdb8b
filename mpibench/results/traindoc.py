"""The `train` part of a results document: its shape, and what is wrong with one read back
(its figures are in trainfigures, its text in traintext).

    doc["train"] = {"model": {"preset", "layers", "hidden", "heads", "seq", "vocab",
                              "parameters"},
                    "parallel": "ddp" | "fsdp" | "none", "bucket_mb", "batch_per_rank",
                    "precision", "warmup",
                    "steps": [{"step", "synced_s": [per rank] | null,
                               "unsynced_s": [per rank], "loss": [per rank]}],
                    "collectives": [{"collective", "size", "count"}],   # one step's calls
                    "summary": {...} | null,   # trainfigures.figures(), once the steps are done
                    "hosts": stragglers.analyze() of the step times | null,
                    "memory": [{"rank", "host", "peak_bytes"}], "memory_kind",
                    "replicas": {"loss": [per rank], "agree": bool, "rtol": float,
                                 "spread": float | null} | null,
                    "scaling": {...} | null}   # against --scale-from
Times are seconds; a job's step time is its slowest rank's, per step, then the median.
"""
from .document import finite

SUMMARY_NUMBERS = ("step_s", "compute_s", "tokens_per_s", "samples_per_s")


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

"""--metrics FILE: a command's results document in Prometheus' text exposition format, replaced
in one rename as node_exporter's textfile collector expects. Label names follow NCCL Inspector's
and DCGM exporter's so dashboards can join them (docs/metrics.md); `command` keeps two commands'
files apart (one series in two files is an error at every scrape). No name outside METRICS is written.
"""
import datetime
import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import UsageError
from ..measure.modes import MODE_KEYS
from .document import measurements
from .files import write_whole
from .schema import Doc

# name: help text (docs/metrics.md lists each one's labels)
METRICS = {
    "mpibench_info": "1, with the run's version, backend, launcher and size as labels",
    "mpibench_start_timestamp_seconds": "when the run started (Unix time)",
    "mpibench_end_timestamp_seconds": "when the run ended (Unix time); absent while it runs",
    "mpibench_complete": "1 when the run finished every step, 0 while it runs or when cut short",
    "mpibench_exit_code": "the job's exit code (0 ok, 1 a check failed, 124 hung, 128+N signal N)",
    "mpibench_collective_busbw_bytes_per_second": "bus bandwidth of one row (nccl-tests' busbw)",
    "mpibench_collective_algbw_bytes_per_second": "algorithm bandwidth of one row (bytes / time)",
    "mpibench_collective_time_seconds": "time per call of one row (mean over ranks of the slowest "
                                        "rank's average, as nccl-tests prints it)",
    "mpibench_collective_wrong_elements": "elements found wrong in one row's check (-c 1)",
    "mpibench_rank_time_seconds": "a rank's median time per call, at the size analysed per host",
    "mpibench_host_time_seconds": "a host's median time per call over its ranks, at the size "
                                  "analysed per host",
    "mpibench_host_slow": "1 when the per-host analysis names the host slow, else 0",
    "mpibench_link_bandwidth_bytes_per_second": "p2p: one link's bandwidth (median iteration)",
    "mpibench_link_latency_seconds": "p2p: one link's latency (half the ping-pong's round trip)",
    "mpibench_link_passed": "p2p: 1 when the link is not named slow, else 0",
    "mpibench_check_passed": "check: 1 when every host and link passed, else 0",
    "mpibench_check_host_passed": "check: 1 when the host passed, else 0; verdict PASS, RAIL (a rail "
                                  "failed, the host is kept) or FAIL (drain it)",
    "mpibench_check_host_busbw_bytes_per_second": "check test 1: busbw among the ranks of one host",
    "mpibench_check_pair_busbw_bytes_per_second": "check test 2: one rail of a pair of hosts, both "
                                                  "directions at once",
    "mpibench_check_pair_passed": "check test 2: 1 when the rail of the pair passed, else 0",
    "mpibench_check_rail_passed": "check: 1 when the host's rail passed, else 0",
    "mpibench_check_suspect": "check: 1 for each link or switch the verdict suspects; kind "
                              "host_rail, uplink, rail_switch, tie or path",
    "mpibench_health_passed": "check --health: 1 when the host is healthy, else 0",
    "mpibench_train_step_seconds": "train: median synced step time",
    "mpibench_train_tokens_per_second": "train: tokens per second over every rank",
    "mpibench_train_exposed_share": "train: share of the step spent in exposed communication",
    "mpibench_train_rank_step_seconds": "train: a rank's median step time",
    "mpibench_verify_check_passed": "verify: 1 when the check passed, 0 when it failed (checks "
                                    "that only inform are left out)",
}


Add = Callable[..., None]               # add(name, value, **labels): one sample


class MetricsFile:
    """The --metrics file: replaced whole at every write (never half written)."""

    def __init__(self, path: str) -> None:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise UsageError(f"cannot write {path}: {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise UsageError(f"cannot write {path}: {folder} is not writable")
        if os.path.isdir(path):
            raise UsageError(f"cannot write {path}: it is a folder (name a file in it, *.prom)")
        self.path = path

    def announcement(self) -> str:
        return f"# Writing metrics to {self.path} (replaced whole at each write)"

    def write(self, doc: Doc) -> None:
        write_whole(self.path, render(doc).encode(), 0o644)   # the exporter may run as its own user


def render(doc: Doc) -> str:
    samples: Dict[str, List[Tuple[Dict[str, Any], float]]] = {name: [] for name in METRICS}
    health = (doc.get("args") or {}).get("health")      # its own files beside check's
    common = {"command": doc.get("command", "") + (" --health" if health else ""),
              "slurm_job_id": (doc.get("env") or {}).get("SLURM_JOB_ID")
              or os.environ.get("SLURM_JOB_ID", "")}

    def add(name: str, value: Any, **labels: Any) -> None:
        if value is not None:
            samples[name].append(({**common, **labels}, float(value)))

    for collect in (_run, _rows, _per_host, _links, _check, _health, _train, _verify):
        collect(doc, add)
    out = []
    for name, text in METRICS.items():
        if samples[name]:
            out += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
            out += [f"{name}{{{_labels(labels)}}} {_number(v)}" for labels, v in samples[name]]
    return "\n".join(out) + "\n"


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})     # Prometheus' label values


def _labels(labels: Dict[str, Any]) -> str:
    return ",".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in labels.items() if v not in (None, ""))


def _number(v: float) -> str:
    return "NaN" if math.isnan(v) else str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _seconds(stamp: Optional[str]) -> Optional[float]:
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp() if stamp else None
    except ValueError:
        return None


def _world(doc: Doc) -> Tuple[Optional[int], Optional[int]]:
    world = doc.get("world") or {}
    return len(world.get("hosts") or []) or None, world.get("size")


def _run(doc: Doc, add: Add) -> None:
    world = doc.get("world") or {}
    n_nodes, nranks = _world(doc)
    add("mpibench_info", 1, version=doc.get("mpibench_version"), backend=world.get("backend"),
        launcher=world.get("launcher"), n_nodes=n_nodes, nranks=nranks)
    add("mpibench_start_timestamp_seconds", _seconds(doc.get("start_time")))
    add("mpibench_end_timestamp_seconds", _seconds(doc.get("end_time")))
    add("mpibench_complete", int(bool(doc.get("complete"))))
    add("mpibench_exit_code", (doc.get("exit") or {}).get("code"))


_MODE_OF = {key: mode for mode, key in MODE_KEYS.items()}      # the label: out or in


def _rows(doc: Doc, add: Add) -> None:
    n_nodes, nranks = _world(doc)
    for row, key, m in measurements(doc):
        if "link" in row:       # p2p's rows: its links say more (_links)
            continue
        labels = dict(collective=row["collective"], message_size=row["size"],
                      dtype=row.get("dtype", row.get("type")), mode=_MODE_OF[key],
                      n_nodes=n_nodes, nranks=nranks)
        add("mpibench_collective_busbw_bytes_per_second", _scaled(m.get("busbw_GBps")), **labels)
        add("mpibench_collective_algbw_bytes_per_second", _scaled(m.get("algbw_GBps")), **labels)
        add("mpibench_collective_time_seconds", m["time_us"] / 1e6, **labels)
        add("mpibench_collective_wrong_elements", m.get("nwrong"), **labels)


def _scaled(gbps: Optional[float]) -> Optional[float]:
    return None if gbps is None else gbps * 1e9


def _per_host(doc: Doc, add: Add) -> None:
    devices = [(d["rank"], str(d.get("device") or ""))
               for d in (doc.get("config") or {}).get("devices") or []]
    gpus = {rank: device.partition(":")[2] or "0"      # the gpu index as DCGM names it
            for rank, device in devices if device.startswith("cuda")}
    for entry in doc.get("hosts", []):
        where = dict(collective=entry["collective"], message_size=entry["size"])
        for r in entry.get("ranks", []):
            add("mpibench_rank_time_seconds", r["median_s"], **where, dtype=entry.get("dtype"),
                mode=entry.get("mode"), rank=r["rank"], node=r["host"], Hostname=r["host"],
                gpu=gpus.get(r["rank"]))
        slow = set(entry.get("slow_hosts") or [])
        for h in entry.get("hosts", []):
            add("mpibench_host_time_seconds", h["median_s"], **where, node=h["host"])
            add("mpibench_host_slow", int(h["host"] in slow), **where, node=h["host"])


def _links(doc: Doc, add: Add) -> None:
    for link in doc.get("links", []):
        labels = dict(node=link["from"].rsplit(":", 1)[0], rank=link.get("from_rank"),
                      peer_node=link["to"].rsplit(":", 1)[0], peer_rank=link.get("to_rank"),
                      bidirectional=str(bool(link.get("bidirectional"))).lower())
        add("mpibench_link_bandwidth_bytes_per_second", _scaled(link.get("bandwidth_GBps")),
            message_size=link.get("size"), **labels)
        if link.get("latency_us") is not None:
            add("mpibench_link_latency_seconds", link["latency_us"] / 1e6,
                message_size=link.get("latency_size"), **labels)
        add("mpibench_link_passed", int(not link.get("slow")), message_size=link.get("size"), **labels)


def _check(doc: Doc, add: Add) -> None:
    if not (check := doc.get("check")):
        return
    config = check.get("config", {})
    size, coll = config.get("size"), config.get("collective")
    if "failing_hosts" in check:
        add("mpibench_check_passed", int(not check["failing_hosts"] and not check.get("suspects")
                                         and not (doc.get("exit") or {}).get("code")))
    for h in check.get("hosts", []):
        add("mpibench_check_host_passed", int(h["verdict"] == "PASS"), node=h["host"],
            verdict=h["verdict"])
        if h.get("intra"):
            add("mpibench_check_host_busbw_bytes_per_second", _scaled(h["intra"]["busbw_GBps"]),
                node=h["host"], collective=coll, message_size=size)
        failed = set(h.get("rails_failed") or [])
        rails = sorted({p["rail"] for p in h.get("pairs", [])})
        for p in h.get("pairs", []):
            labels = dict(node=h["host"], peer_node=p["partner"], rail=p["rail"], round=p["round"])
            add("mpibench_check_pair_busbw_bytes_per_second", _scaled(p["busbw_GBps"]), **labels)
            add("mpibench_check_pair_passed", int(bool(p["passed"])), **labels)
        for rail in rails:
            add("mpibench_check_rail_passed", int(rail not in failed and h["verdict"] != "FAIL"),
                node=h["host"], rail=rail)
    for name in check.get("suspects", []):
        add("mpibench_check_suspect", 1, link=name, kind=_kind(name))


def _kind(name: str) -> str:
    """The kind of a suspect as checkjudge names it (few values: a label)."""
    if "(a tie" in name:
        return "tie"
    if name.startswith("uplink "):
        return "uplink"
    if name.startswith("path "):
        return "path"
    if " switch" in name.split("(")[0]:
        return "rail_switch"
    return "host_rail"


def _health(doc: Doc, add: Add) -> None:
    if health := doc.get("health"):
        add("mpibench_health_passed", int(health["healthy"]), node=health["node"])


def _train(doc: Doc, add: Add) -> None:
    train = doc.get("train") or {}
    if not (summary := train.get("summary")):
        return
    labels = dict(model=(train.get("model") or {}).get("preset") or (train.get("model") or {}).get("name"),
                  parallel=train.get("parallel"), nranks=_world(doc)[1])
    add("mpibench_train_step_seconds", summary.get("step_s"), **labels)
    add("mpibench_train_tokens_per_second", summary.get("tokens_per_s"), **labels)
    add("mpibench_train_exposed_share", summary.get("exposed_share"), **labels)
    for r in (train.get("hosts") or {}).get("ranks", []):
        add("mpibench_train_rank_step_seconds", r["median_s"], rank=r["rank"], node=r["host"])


def _verify(doc: Doc, add: Add) -> None:
    for c in (doc.get("verify") or {}).get("checks", []):
        if c.get("verdict") in ("PASS", "FAIL"):
            add("mpibench_verify_check_passed", int(c["verdict"] == "PASS"), check=c["check"])

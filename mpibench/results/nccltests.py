"""nccl-tests' -J JSON (version 2.19.6) read as a results document (its printed output:
nccltestslog.py), and a run's results document written in it, for the tools written for
nccl-tests (tools/analyze_perf_json.py, CSV converters). -J has no collective name: it is
read from "experiment_name", else from the program in "args", and written to the former.
"""
import datetime
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import __version__
from ..measure.collectives import REGISTRY
from ..measure.dtypes import DTYPES
from ..measure.modes import MODES
from .document import finite, new

JSON_VERSION = 3                 # what nccl-tests 2.19.6 writes (util.cu JSON_FILE_VERSION)
_BY_LABEL = {d.label: d.name for d in DTYPES.values()}
PER_ITER_SUMMARY = ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct")


class Unreadable(ValueError):
    """Not nccl-tests output after all, or damaged: the reason."""


def looks_like_json(doc: Any) -> bool:
    return (isinstance(doc, dict) and doc.get("tool") is None and isinstance(doc.get("results"), list)
            and isinstance(doc.get("config"), dict) and isinstance(doc.get("version"), int))


def collective_name(program: object) -> str:
    """all_gather_perf_mpi, ./build/alltoall_perf, alltoall -> all_gather, all_to_all."""
    name = os.path.basename(str(program))
    for suffix in ("_mpi", "_perf"):
        name = name[:-len(suffix)] if name.endswith(suffix) else name
    return next((c.name for c in REGISTRY.values() if c.program == name), name)     # nccl-tests' name


def document(rows: List[Dict[str, Any]], hosts: List[str], ranks: Optional[int], command: str,
             start_time: Optional[str], note: str, source: str = "nccl-tests") -> Dict[str, Any]:
    doc = new(command, [], start_time=start_time or "", complete=True, results=rows,
              notes=[note], source=source)
    if ranks:
        doc["world"] = {"size": ranks, "hosts": list(dict.fromkeys(hosts)),
                        "backend": "nccl (nccl-tests)"}
    return doc


def row_of(collective: str, size: int, count: int, label: str, redop: str, root: int,
           modes: Dict[str, Dict[str, Any]], ranks: Optional[int]) -> Dict[str, Any]:
    if ranks == 1:          # busbw is not defined (factor 0; nccl-tests prints 0)
        for m in modes.values():
            m["busbw_GBps"] = None
    return {"collective": collective, "backend": "nccl", "size": size, "count": count,
            "type": label, "dtype": _BY_LABEL.get(label, label), "redop": redop, "root": root,
            "out_of_place": modes.get("out_of_place"), "in_place": modes.get("in_place")}


def mode_figures(time_us: Optional[float], alg: Optional[float], bus: Optional[float],
                 nwrong: Optional[int]) -> Dict[str, Any]:
    """One mode's figures as mpibench writes them (either form of nccl-tests' output); time > 0."""
    if time_us is None or not time_us > 0:
        raise Unreadable("a time is not above 0")
    return {"time_us": time_us, "algbw_GBps": alg, "busbw_GBps": bus, "nwrong": nwrong}


# ---- -J JSON ----
def _num(obj: Dict[str, Any], key: str) -> Optional[float]:
    v = obj.get(key)
    if v is None or isinstance(v, str) and v.strip().lower() == "nan":
        return None
    if not finite(v):
        raise Unreadable(f"{key} is not a number: {v!r}")
    return float(v)


def parse_json(doc: Dict[str, Any]) -> Dict[str, Any]:
    """nccl-tests' -J document -> results document."""
    args: List[Any] = doc["args"] if isinstance(doc.get("args"), list) else []
    devices = doc["config"].get("devices") or []
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise Unreadable("config.devices is not a list of objects")
    ranks = len(devices) or None
    rows = [_json_row(r, f"results[{i}]", args, ranks) for i, r in enumerate(doc["results"])]
    hosts = [d.get("hostname") for d in devices if isinstance(d.get("hostname"), str)]
    name = rows[0]["collective"] if rows else "?"
    start = doc.get("start_time") if isinstance(doc.get("start_time"), str) else None
    out = document(rows, hosts, ranks, f"nccl-tests {name}_perf", start,
                   f"read from nccl-tests' -J JSON (version {doc.get('version')})")
    avg = doc.get("average_bus_bandwidth")
    out["average_bus_bandwidth"] = _num(avg, "bandwidth") if isinstance(avg, dict) else None
    return out


def _json_row(r: Any, where: str, args: List[Any], ranks: Optional[int]) -> Dict[str, Any]:
    """One of -J's results as a document row; Unreadable naming where it is."""
    if not isinstance(r, dict):
        raise Unreadable(f"{where} is not an object")
    name = r.get("experiment_name") or (args[0] if args else None)
    if not name:
        raise Unreadable(f"{where}: no experiment_name and no program in args: which collective?")
    try:
        modes: Dict[str, Dict[str, Any]] = {key: _json_mode(r, key, m) for key in MODES
                                            if (m := r.get(key)) is not None}
        root = int(str(r.get("root", "-1")).strip())
        size, count = r.get("size"), r.get("count")
        if not isinstance(size, int) or not isinstance(count, int) or isinstance(size, bool):
            raise Unreadable("size and count must be whole numbers")
        label, redop = r.get("type"), r.get("redop")
        if not isinstance(label, str) or not isinstance(redop, str):
            raise Unreadable("type and redop must be text")
    except (Unreadable, ValueError, TypeError) as exc:
        raise Unreadable(f"{where}: {exc}") from None
    return row_of(collective_name(name), size, count, label, redop, root, modes, ranks)


def _json_mode(r: Dict[str, Any], key: str, m: Any) -> Dict[str, Any]:
    """One mode's figures, with its per-iteration object (-I 1) once its summary is numbers."""
    if not isinstance(m, dict):
        raise Unreadable(f"{key} is not an object")
    t, wrong, alg, bus = (_num(m, k) for k in ("time" if "time" in m else "cpu_time",
                                               "nwrong", "alg_bw", "bus_bw"))
    mode = mode_figures(t, alg, bus, None if wrong is None else int(wrong))
    if (p := r.get(key + "_per_iter")) is not None:
        if not isinstance(p, dict):
            raise Unreadable(f"{key}_per_iter is not an object")
        if missing := next((k for k in PER_ITER_SUMMARY if _num(p, k) is None), None):
            raise Unreadable(f"{key}_per_iter: {missing} is missing")
        mode["per_iter"] = p
    return mode


# ---- writing the -J schema ----
def _stamp(iso: Any) -> str:
    """nccl-tests' time format (%Y-%m-%d %H:%M:%S) from mpibench's ISO time."""
    try:
        return datetime.datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return ""


def _nccl_code(versions: Any) -> int:
    """NCCL_VERSION_CODE of the NCCL torch reports; 0 when none (gloo)."""
    for v in (versions.values() if isinstance(versions, dict) else versions or []):
        text = v.get("nccl") if isinstance(v, dict) else None
        if m := re.match(r"(\d+)\.(\d+)\.(\d+)", str(text or "")):
            a, b, c = map(int, m.groups())
            return a * 10000 + b * 100 + c
    return 0


def version_line(versions: Any) -> str:
    """mpibench's line in the place of nccl-tests' '# nccl-tests version ...' (NCCL's version code)."""
    v0 = next(iter(versions.values())) if isinstance(versions, dict) else (versions or [{}])[0]
    return (f"# mpibench version {__version__} torch {v0.get('torch', '?')} "
            f"nccl-library={_nccl_code(versions) or 'none'}")


def _step(sizes: Sequence[int]) -> Tuple[str, int]:
    """nccl-tests' step between sizes: ("factor", -f) or ("bytes", -i)."""
    if len(sizes) > 1 and sizes[0] and sizes[1] % sizes[0] == 0:
        return "factor", sizes[1] // sizes[0]
    return "bytes", sizes[1] - sizes[0] if len(sizes) > 1 else 0


def settings_line(sizes: Sequence[int], warmup: int, iters: int, check: int, graph: int) -> str:
    """nccl-tests' "# nThread 1 nGpus 1 minBytes ..." line (one thread, one GPU per process)."""
    kind, step = _step(sizes)
    return (f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: {step}({kind}) "
            f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: {int(bool(check))} "
            f"graph: {graph} unalign: 0")


def _flag(value: Any) -> str:
    return "true" if value else "false"         # nccl-tests' jsonBool writes strings


def _blocking(value: Any) -> bool:
    """nccl-tests' blocking_coll is its -z (0-3), written as a bool: any mode but 0. Ours is
    -z too (a bool in older results), or one per backend."""
    values = value.values() if isinstance(value, dict) else [value]
    return any(v is True or (not isinstance(v, bool) and isinstance(v, int) and v > 0)
               for v in values)


def _per_iter_out(p: Dict[str, Any]) -> Dict[str, Any]:
    """writePerIterReport's object; the per-process rows only with several (as nccl-tests)."""
    rows = p.get("per_process_max_times_us") or []
    return ({k: p[k] for k in ("skipped_iterations", *PER_ITER_SUMMARY, "times_us")}
            | ({"per_process_max_times_us": rows} if len(rows) > 1 else {}))


def _result_out(r: Dict[str, Any], iters: int) -> Dict[str, Any]:
    """One row in -J's key order: each mode followed by its per-iteration object (-I 1)."""
    out = {"size": r["size"], "count": r["count"], "type": r["type"], "redop": r["redop"],
           "root": "%6i" % r["root"]}
    for key in MODES:
        m = r.get(key)
        out[key] = None if m is None else {
            "time": m["time_us"], "alg_bw": m["algbw_GBps"] or 0.0,
            "bus_bw": m["busbw_GBps"] or 0.0,   # nccl-tests prints 0 where busbw is undefined
            "nwrong": None if m["nwrong"] is None else float(m["nwrong"])}
        if m and m.get("per_iter"):
            out[key + "_per_iter"] = _per_iter_out(m["per_iter"])
    out.update(actual_iterations=iters, experiment_name=r["collective"])
    return out


def render(doc: Dict[str, Any]) -> List[str]:
    """A run's results document in nccl-tests' -J schema, as text in parts."""
    from .files import json_parts
    cfg = doc.get("config") or {}
    sizes = cfg.get("sizes") or [r["size"] for r in doc["results"]] or [0]
    kind, step = _step(sizes)
    # as nccl-tests' "Rank ... device N [PCI address] name" line: the CUDA index the rank
    # uses (not its local rank: with one GPU per task that is 0), none on CPUs (-1)
    devices = [{"rank": d.get("rank"), "group": 0, "pid": d.get("pid"), "hostname": d.get("hostname"),
                "device": int(dev[5:]) if (dev := str(d.get("device", ""))).startswith("cuda:") else -1,
                "device_hex": d.get("bus_id") or "", "device_info": d.get("device_name") or dev}
               for d in cfg.get("devices") or []]
    out = {"version": JSON_VERSION, "start_time": _stamp(doc.get("start_time")),
           "args": ["mpibench"] + list(doc.get("argv") or []),
           "env": [f"{k}={v}" for k, v in (doc.get("env") or {}).items()],
           "nccl_version": _nccl_code(doc.get("versions")),
           "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": min(sizes),
                      "maximum_bytes": max(sizes), f"step_{kind}": step,
                      "warmup_iters": cfg.get("warmup", 0), "iterations": cfg.get("iters", 0),
                      "aggregated_iterations": 1, "validation": int(bool(cfg.get("check"))),
                      "graph": cfg.get("graph", 0),
                      "blocking_collectives": _flag(_blocking(cfg.get("blocking"))),
                      "per_iter_timing": _flag(cfg.get("per_iter_timing")),
                      "per_iter_skip": cfg.get("per_iter_skip", 0),
                      "parallel_init": "false", "devices": devices},
           "results": [_result_out(r, cfg.get("iters", 0)) for r in doc["results"]]}
    if bounds := doc.get("out_of_bounds"):
        out["out_of_bounds"] = {"count": bounds["count"], "okay": _flag(bounds["okay"])}
    if "average_bus_bandwidth" in doc:
        avg = doc["average_bus_bandwidth"]
        out["average_bus_bandwidth"] = {"bandwidth": "nan" if avg is None else avg,
                                        "okay": "unchecked"}
        out["errors"] = []
    if doc.get("end_time"):
        out["end_time"] = _stamp(doc["end_time"])
    return json_parts(out, cache=False)         # its rows are new objects at every write

"""nccl-tests' own formats (version 2.19.6), both ways.

Read: its printed output (the header, the "#  Rank" device lines and the table lines)
and its -J JSON, each turned into a results document as mpibench writes one, so that
report, compare, plot and check --baseline take them as they are. Write: a run's
results document in the -J schema, so that tools written for nccl-tests (its
tools/analyze_perf_json.py, CSV converters) read mpibench's results unchanged.

The -J schema has no collective name (nccl-tests runs one binary per collective):
the reader takes it from "experiment_name" when set, else from the program in "args"
(all_reduce_perf -> all_reduce); the writer puts it in "experiment_name".
"""
import datetime
import os
import re

from .. import __version__
from ..measure.dtypes import DTYPES
from .document import finite, new

JSON_VERSION = 3                 # what nccl-tests 2.19.6 writes (util.cu JSON_FILE_VERSION)
NCCL_TESTS_VERSION = "2.19.6"
_BY_LABEL = {d.label: d.name for d in DTYPES.values()}
_RANK_LINE = re.compile(r"#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)")
_START = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_AVERAGE = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([-+0-9.eE]+)")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
PER_ITER_SUMMARY = ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class Unreadable(ValueError):
    """Not nccl-tests output after all, or damaged: the reason."""


def looks_like_text(text):
    """Whether text is nccl-tests' printed output (its header or table header)."""
    head = text[:20000]
    return ("# nccl-tests version" in head or "# mpibench version" in head
            or _START.search(head) is not None)


def looks_like_json(doc):
    return (isinstance(doc, dict) and doc.get("tool") is None and isinstance(doc.get("results"), list)
            and isinstance(doc.get("config"), dict) and isinstance(doc.get("version"), int))


def _collective(program):
    name = os.path.basename(str(program))
    return name[:-len("_perf")] if name.endswith("_perf") else name


def _document(rows, hosts, ranks, command, start_time, note):
    world = {"size": ranks, "hosts": list(dict.fromkeys(hosts)),
             "backend": "nccl (nccl-tests)"} if ranks else None
    doc = new(command, [], start_time=start_time or "", complete=True, results=rows,
              notes=[note], source="nccl-tests")
    if world:
        doc["world"] = world
    return doc


def _row(collective, size, count, label, redop, root, modes):
    row = {"collective": collective, "backend": "nccl", "size": size, "count": count,
           "type": label, "dtype": _BY_LABEL.get(label, label), "redop": redop, "root": root,
           "out_of_place": modes.get("out_of_place"), "in_place": modes.get("in_place")}
    return row


# ---- printed output ----
def _value(token):
    if token in ("N/A", "n/a"):
        return None
    if not _NUMBER.match(token):
        raise Unreadable(f"{token!r} is not a number")
    return float(token)


def _mode(values):
    time_us, alg, bus, wrong = values[:4]
    if time_us is None or not time_us > 0:
        raise Unreadable("a time is not above 0")
    return {"time_us": time_us, "algbw_GBps": alg, "busbw_GBps": bus if bus else None,
            "nwrong": None if wrong is None else int(wrong)}


def parse_text(text):
    """nccl-tests' printed output -> results document (Unreadable when it has no rows)."""
    collective, rows, hosts, per_iter, average = None, [], {}, False, None
    spread = False          # mpibench's header: two "rank spread" columns after nccl-tests'

    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = _START.match(stripped)
        if m:
            collective = _collective(m.group(1))
            continue
        m = _RANK_LINE.match(stripped)
        if m:
            hosts[int(m.group(1))] = m.group(2)
            continue
        if stripped.startswith("#"):
            per_iter |= "i_min" in stripped
            spread |= "rank spread" in stripped
            m = _AVERAGE.match(stripped)
            if m:
                average = float(m.group(1))
            continue
        f = stripped.split()
        if len(f) < 9 or not f[0].isdigit():
            continue
        if collective is None:
            raise Unreadable(f"line {n}: a table line before '# Collective test starting'")
        try:
            cells = f[5:]
            if len(cells) >= 2 and _STAMP.match(" ".join(cells[-2:])):     # -T 1
                cells = cells[:-2]
            if spread:
                cells = cells[:-2]
            width = 8 if per_iter else 4         # -I 1 adds i_min i_max i_p99 i_cv% per mode
            # mpibench prints a lone n/a for a mode torch cannot run
            lone = len(cells) == width + 1 and "n/a" in (cells[0], cells[width])
            numbers = [_value(x) for x in cells]
            if lone:
                modes = ({"in_place": _mode(numbers[1:5])} if cells[0] == "n/a"
                         else {"out_of_place": _mode(numbers[:4])})
            elif len(numbers) == 2 * width:
                modes = {"out_of_place": _mode(numbers[:4]),
                         "in_place": _mode(numbers[width:width + 4])}
            elif len(numbers) == width:          # in place only (trace replay)
                modes = {"in_place": _mode(numbers[:4])}
            else:
                raise Unreadable(f"{len(numbers)} figures after the root, expected "
                                 f"{width} or {2 * width}")
            rows.append(_row(collective, int(f[0]), int(f[1]), f[2], f[3], int(f[4]), modes))
        except (Unreadable, ValueError) as exc:
            raise Unreadable(f"line {n}: {exc}") from None
    if not rows:
        raise Unreadable("no table lines (size count type redop root ...)")
    ranks = len(hosts) or None
    doc = _document(rows, [hosts[r] for r in sorted(hosts)], ranks,
                    f"nccl-tests {collective}_perf", None, "read from nccl-tests' printed output")
    doc["average_bus_bandwidth"] = average
    return doc


# ---- -J JSON ----
def _num(obj, key):
    v = obj.get(key)
    if isinstance(v, str) and v.strip().lower() == "nan":
        return None
    if v is None:
        return None
    if not finite(v):
        raise Unreadable(f"{key} is not a number: {v!r}")
    return float(v)


def _per_iter_in(p, key):
    """-I 1's per-iteration object of one mode, kept as it is once its summary is numbers."""
    if p is None:
        return None
    if not isinstance(p, dict):
        raise Unreadable(f"{key}_per_iter is not an object")
    for k in PER_ITER_SUMMARY:
        if _num(p, k) is None:
            raise Unreadable(f"{key}_per_iter: {k} is missing")
    return p


def parse_json(doc):
    """nccl-tests' -J document -> results document."""
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    devices = doc["config"].get("devices") or []
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        raise Unreadable("config.devices is not a list of objects")
    rows = []
    for i, r in enumerate(doc["results"]):
        where = f"results[{i}]"
        if not isinstance(r, dict):
            raise Unreadable(f"{where} is not an object")
        name = r.get("experiment_name") or (args[0] if args else None)
        if not name:
            raise Unreadable(f"{where}: no experiment_name and no program in args: which collective?")
        modes = {}
        try:
            for key in ("out_of_place", "in_place"):
                m = r.get(key)
                if m is None:
                    continue
                if not isinstance(m, dict):
                    raise Unreadable(f"{key} is not an object")
                t = _num(m, "time") if "time" in m else _num(m, "cpu_time")
                wrong = _num(m, "nwrong")
                modes[key] = _mode([t, _num(m, "alg_bw"), _num(m, "bus_bw"), wrong])
                per_iter = _per_iter_in(r.get(key + "_per_iter"), key)
                if per_iter is not None:
                    modes[key]["per_iter"] = per_iter
            root = int(str(r.get("root", "-1")).strip())
            size, count = r.get("size"), r.get("count")
            if not isinstance(size, int) or not isinstance(count, int) or isinstance(size, bool):
                raise Unreadable("size and count must be whole numbers")
            label, redop = r.get("type"), r.get("redop")
            if not isinstance(label, str) or not isinstance(redop, str):
                raise Unreadable("type and redop must be text")
        except (Unreadable, ValueError, TypeError) as exc:
            raise Unreadable(f"{where}: {exc}") from None
        rows.append(_row(_collective(name), size, count, label, redop, root, modes))
    ranks = len(devices) or None
    hosts = [d.get("hostname") for d in devices if isinstance(d.get("hostname"), str)]
    name = rows[0]["collective"] if rows else "?"
    start = doc.get("start_time") if isinstance(doc.get("start_time"), str) else None
    out = _document(rows, hosts, ranks, f"nccl-tests {name}_perf", start,
                    f"read from nccl-tests' -J JSON (version {doc.get('version')})")
    avg = doc.get("average_bus_bandwidth")
    out["average_bus_bandwidth"] = _num(avg, "bandwidth") if isinstance(avg, dict) else None
    return out


# ---- writing the -J schema ----
def _stamp(iso):
    """nccl-tests' time format (%Y-%m-%d %H:%M:%S) from mpibench's ISO time."""
    try:
        return datetime.datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError):
        return ""


def _nccl_code(versions):
    """NCCL_VERSION_CODE (major*10000 + minor*100 + patch) of the NCCL torch reports; 0
    when there is none (gloo)."""
    for v in (versions.values() if isinstance(versions, dict) else versions or []):
        text = v.get("nccl") if isinstance(v, dict) else None
        m = re.match(r"(\d+)\.(\d+)\.(\d+)", str(text or ""))
        if m:
            a, b, c = map(int, m.groups())
            return a * 10000 + b * 100 + c
    return 0


def version_line(versions):
    """mpibench's line in the place of nccl-tests' "# nccl-tests version 2.19.6
    nccl-headers=N nccl-library=N" (NCCL's version code, none on gloo)."""
    v0 = next(iter(versions.values())) if isinstance(versions, dict) else (versions or [{}])[0]
    code = _nccl_code(versions)
    return (f"# mpibench version {__version__} torch {v0.get('torch', '?')} "
            f"nccl-library={code or 'none'}")


def settings_line(sizes, warmup, iters, check, graph):
    """nccl-tests' "# nThread 1 nGpus 1 minBytes ..." line (one thread, one GPU per process)."""
    if len(sizes) > 1 and sizes[0] and sizes[1] % sizes[0] == 0:
        step = f"{sizes[1] // sizes[0]}(factor)"
    else:
        step = f"{sizes[1] - sizes[0] if len(sizes) > 1 else 0}(bytes)"
    return (f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} step: {step} "
            f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: {int(bool(check))} "
            f"graph: {graph} unalign: 0")


def _flag(value):
    return "true" if value else "false"         # nccl-tests' jsonBool writes strings


def _blocking(value):
    """nccl-tests' blocking_coll is its -z (0-3), written as a bool: any mode but 0. Ours is
    -z too (a bool in older results), or one per backend."""
    values = value.values() if isinstance(value, dict) else [value]
    return any(v is True or (not isinstance(v, bool) and isinstance(v, int) and v > 0)
               for v in values)


def _mode_out(m):
    if m is None:
        return None
    return {"time": m["time_us"], "alg_bw": m["algbw_GBps"] or 0.0,
            "bus_bw": m["busbw_GBps"] or 0.0,   # nccl-tests prints 0 where busbw is undefined
            "nwrong": None if m["nwrong"] is None else float(m["nwrong"])}


def _per_iter_out(p):
    """writePerIterReport's object; like nccl-tests, the per-process rows only when there
    are several processes (mpibench runs one rank per process)."""
    out = {k: p[k] for k in ("skipped_iterations", *PER_ITER_SUMMARY, "times_us")}
    rows = p.get("per_process_max_times_us") or []
    if len(rows) > 1:
        out["per_process_max_times_us"] = rows
    return out


def _result_out(r, iters):
    """One row in -J's key order: each mode followed by its per-iteration object (-I 1)."""
    out = {"size": r["size"], "count": r["count"], "type": r["type"], "redop": r["redop"],
           "root": "%6i" % r["root"]}
    for key in ("out_of_place", "in_place"):
        m = r.get(key)
        out[key] = _mode_out(m)
        if m and m.get("per_iter"):
            out[key + "_per_iter"] = _per_iter_out(m["per_iter"])
    out.update(actual_iterations=iters, experiment_name=r["collective"])
    return out


def render(doc):
    """A run's results document in nccl-tests' -J schema, as text."""
    import json
    cfg = doc.get("config") or {}
    sizes = cfg.get("sizes") or [r["size"] for r in doc["results"]] or [0]
    step = {"step_factor": int(round(sizes[1] / sizes[0]))} if len(sizes) > 1 and sizes[0] \
        and sizes[1] % sizes[0] == 0 else {"step_bytes": sizes[1] - sizes[0] if len(sizes) > 1 else 0}
    devices = [{"rank": d.get("rank"), "group": 0, "pid": d.get("pid"),
                "hostname": d.get("hostname"), "device": d.get("local_rank", 0),
                "device_hex": "", "device_info": str(d.get("device", ""))}
               for d in cfg.get("devices") or []]
    out = {"version": JSON_VERSION, "start_time": _stamp(doc.get("start_time")),
           "args": ["mpibench"] + list(doc.get("argv") or []),
           "env": [f"{k}={v}" for k, v in (doc.get("env") or {}).items()],
           "nccl_version": _nccl_code(doc.get("versions")),
           "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": min(sizes),
                      "maximum_bytes": max(sizes), **step,
                      "warmup_iters": cfg.get("warmup", 0), "iterations": cfg.get("iters", 0),
                      "aggregated_iterations": 1, "validation": int(bool(cfg.get("check"))),
                      "graph": cfg.get("graph", 0),
                      "blocking_collectives": _flag(_blocking(cfg.get("blocking"))),
                      "per_iter_timing": _flag(cfg.get("per_iter_timing")),
                      "per_iter_skip": cfg.get("per_iter_skip", 0),
                      "parallel_init": "false", "devices": devices},
           "results": [_result_out(r, cfg.get("iters", 0)) for r in doc["results"]]}
    bounds = doc.get("out_of_bounds")
    if bounds:
        out["out_of_bounds"] = {"count": bounds["count"], "okay": _flag(bounds["okay"])}
    if "average_bus_bandwidth" in doc:
        avg = doc["average_bus_bandwidth"]
        out["average_bus_bandwidth"] = {"bandwidth": "nan" if avg is None else avg,
                                        "okay": "unchecked"}
        out["errors"] = []
    if doc.get("end_time"):
        out["end_time"] = _stamp(doc["end_time"])
    return json.dumps(out, indent=1, allow_nan=False) + "\n"

"""NCCL's effective parameter values, read through NCCL 2.30's key-based parameter API.

ncclParamGetAllParameterKeys lists the registered keys (the NCCL_* variable names NCCL
documents; NCCL_PARAM_DUMP_ALL=1 lists all), ncclParamGetParameter gives each one's value as
NCCL uses it: the environment's, nccl.conf's, or NCCL's default. The library read is the one
this process loaded (its path in /proc/self/maps, after NCCL's init), else torch's bundled
nvidia/nccl/lib/libnccl.so.2; never another one found on the system. doctor's NCCL probe
prints one MARK line of JSON per rank; doctor compares the ranks and the environment."""
import ctypes
import json
import os
import pathlib
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .findings import Finding

MIN_VERSION = (2, 30)
MARK = "MPIBENCH NCCL PARAMS "
# Set by doctor for its probe, per rank (a log file each): not the job's settings
PROBE_SET = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE",
             "NCCL_RUN_RAS_DIAGNOSTICS", "NCCL_RUN_DIAGNOSTICS")


def library(maps: Optional[str] = None, paths: Optional[Sequence[str]] = None) -> Tuple[Optional[str], str]:
    """(path of the libnccl to read, where it was found), or (None, why none)."""
    if maps is None:
        try:
            maps = pathlib.Path("/proc/self/maps").read_text()
        except OSError:
            maps = ""
    for line in maps.splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if os.path.basename(path).startswith("libnccl.so"):
            return path, "loaded by this process"
    for site in sys.path if paths is None else paths:
        bundled = os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so.2")
        if os.path.isfile(bundled):
            return bundled, "torch's bundled NCCL (none loaded in this process)"
    return None, "no libnccl loaded, and no torch-bundled nvidia/nccl/lib/libnccl.so.2"


def read(path: str) -> Dict[str, Any]:
    """{'path', 'version': 'x.y.z' or None, 'values': {key: value} or None, 'why': None or why
    not}, from the library at path."""
    out: Dict[str, Any] = {"path": path, "version": None, "values": None, "why": None}
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        return dict(out, why=f"cannot load {path}: {exc}")
    code = ctypes.c_int(0)
    if hasattr(lib, "ncclGetVersion") and lib.ncclGetVersion(ctypes.byref(code)) == 0:
        v = code.value      # 2.9+: major*10000 + minor*100 + patch
        out["version"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    if not (hasattr(lib, "ncclParamGetAllParameterKeys") and hasattr(lib, "ncclParamGetParameter")):
        return dict(out, why=f"NCCL {out['version'] or '(version unknown)'} has no parameter API "
                             f"({'.'.join(map(str, MIN_VERSION))}+) in {path}")
    table, n = ctypes.POINTER(ctypes.c_char_p)(), ctypes.c_int(0)
    rc = lib.ncclParamGetAllParameterKeys(ctypes.byref(table), ctypes.byref(n))
    if rc != 0:
        return dict(out, why=f"ncclParamGetAllParameterKeys returned {rc}")
    keys = [table[i] for i in range(n.value)]     # copied: the table lives until the next call
    values: Dict[str, str] = {}
    for key in keys:
        value, size = ctypes.c_char_p(), ctypes.c_int(0)
        if lib.ncclParamGetParameter(key, ctypes.byref(value), ctypes.byref(size)) == 0:
            text = ctypes.string_at(value, size.value) if value.value is not None else b""
            values[key.decode(errors="replace")] = text.decode(errors="replace")
    return dict(out, values=values)


def report() -> str:
    """The probe's MARK line: this process's NCCL parameters (read after NCCL's init)."""
    path, found = library()
    got = read(path) if path else {"path": None, "version": None, "values": None, "why": found}
    env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_") and k not in PROBE_SET}
    return MARK + json.dumps(dict(got, found=found, env=env))


def collect(outputs: Sequence[str]) -> List[Optional[Dict[str, Any]]]:
    """Per rank (doctor's probe outputs in rank order): its MARK line's content, or None."""
    out: List[Optional[Dict[str, Any]]] = []
    for said in outputs:
        lines = [x[len(MARK):] for x in (said or "").splitlines() if x.startswith(MARK)]
        out.append(json.loads(lines[-1]) if lines else None)
    return out


def why_not(skipped: str) -> str:
    """Why effective values are not read when doctor's NCCL probe did not run."""
    try:
        import torch
        cuda = torch.version.cuda
    except Exception:
        cuda = None
    if cuda is None:
        return "no libnccl loaded: torch without CUDA"
    return f"NCCL was not started, the NCCL check did not run ({skipped})"


def compare(ranks: Sequence[Optional[Mapping[str, Any]]], where: Sequence[Tuple[str, int]]
            ) -> Tuple[Dict[str, Dict[str, List[int]]], List[Tuple[int, str, str, str]]]:
    """({key: {value: [ranks]}} for the keys whose value differs across the ranks that read
    them, [(rank, key, environment's value, effective value)] where they differ; keys doctor
    sets for its probe left out). Values compare as NCCL prints them."""
    seen: Dict[str, Dict[str, List[int]]] = {}
    ignored = []
    for r, got in enumerate(ranks):
        if not got or got.get("values") is None:
            continue
        for key, value in got["values"].items():
            if key in PROBE_SET:
                continue
            seen.setdefault(key, {}).setdefault(value, []).append(r)
            env = got.get("env", {}).get(key)
            if env is not None and env.strip().lower() != value.strip().lower():
                ignored.append((r, key, env, value))
    return {k: v for k, v in seen.items() if len(v) > 1}, ignored


def reasons(ranks: Sequence[Optional[Mapping[str, Any]]], where: Sequence[Tuple[str, int]]) -> Optional[str]:
    """Why ranks did not read their values, each reason once with its ranks (none named when
    it holds for every rank), or None when every rank read them."""
    why: Dict[str, List[int]] = {}
    for r, got in enumerate(ranks):
        said = "the probe did not print them" if got is None else got.get("why")
        if said:
            why.setdefault(said, []).append(r)
    if not why:
        return None
    if len(why) == 1 and len(next(iter(why.values()))) == len(ranks):
        return next(iter(why))
    return "; ".join(f"{w} on {_name(rs, where)}" for w, rs in why.items())


def _name(ranks: Sequence[int], where: Sequence[Tuple[str, int]]) -> str:
    hosts = [where[r][0] if r < len(where) else "?" for r in ranks]
    return ", ".join(f"rank {r} ({h})" for r, h in zip(ranks, hosts))


def findings(differ: Mapping[str, Mapping[str, Sequence[int]]],
             where: Sequence[Tuple[str, int]]) -> List[Finding]:
    """A finding per NCCL parameter whose effective value differs across ranks."""
    out = []
    for key, values in differ.items():
        hosts = {where[r][0] for rs in values.values() for r in rs if r < len(where)}
        said = "; ".join(f"{v!r} on {_name(rs, where)}" for v, rs in values.items())
        out.append(Finding(hosts.pop() if len(hosts) == 1 else None,
                           f"NCCL's effective {key} differs across ranks: {said}: set it alike on "
                           f"every rank (mpirun -x, nccl.conf)"))
    return out

"""What doctor prints: each host's facts, what differs, NCCL's transports, the findings."""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .numbers import counted, plural
from .output import RunOutput


def hosts(out: RunOutput, per_host: Mapping[str, Dict[str, Any]], ranks: Mapping[str, List[int]],
          size: int, launcher: str, version_keys: Sequence[str]) -> None:
    out.say(f"# mpibench doctor: {counted(len(per_host), 'host')}, {counted(size, 'rank')}, "
            f"launcher {launcher}")
    out.announce_files()
    for host, f in per_host.items():
        out.say(*_host(host, f, ranks[host], version_keys))


def _host(host: str, f: Dict[str, Any], ranks: List[int], version_keys: Sequence[str]) -> List[str]:
    """One host's facts: versions, GPUs, variables, interfaces, RDMA, paths, GPU topology."""
    v, cvd = f["versions"], f["cuda_visible_devices"]
    lines = [f"#\n# host {host} ({plural(len(ranks), 'rank')} {', '.join(map(str, ranks))})",
             "#   versions    " + ", ".join(f"{k} {v.get(k) or '-'}" for k in version_keys)]
    models = ", ".join(sorted({g["name"] for g in f["gpus"]}))
    gpu = (f"{len(f['gpus'])} x {models}, driver {f['driver']}" if f["gpus"]
           else "none" + (f" ({f['tool_errors'][0]})" if f["tool_errors"] else ""))
    lines.append(f"#   GPUs        {gpu}; CUDA_VISIBLE_DEVICES {'unset' if cvd is None else cvd}")
    lines.append("#   variables   " + (" ".join(f"{k}={val}" for k, val in f["env"].items()) if f["env"]
                                      else "no NCCL_/GLOO_/UCX_/OMPI_MCA_ variables set"))
    nics = [f"{i['name']} {i['state']} {i['speed_mbps'] or '-'} Mb/s" for i in f["interfaces"]]
    lines.append("#   interfaces  " + (", ".join(nics) or f"none under {f['root']}sys/class/net"))
    lines.append(_rdma(f["rdma"], f["rdma_modules"]))
    lines += ["#   paths       " + line if i == 0 else "#               " + line
              for i, line in enumerate(path_lines(f["paths"]))]
    if f["topology"]:
        lines.append("#   GPU topology (nvidia-smi topo -m):")
        lines += ["#     " + line for line in f["topology"].splitlines()]
    return lines


def _rdma(rdma: List[Dict[str, Any]], mods: Optional[List[str]]) -> str:
    ports = [f"{p['device']}/{p['port']} {p['state']} {p['rate'] or '-'} {p['link_layer']}" for p in rdma]
    return ("#   RDMA        " + (", ".join(ports) or "no devices") + "; modules "
            + ("unknown (/proc/modules unreadable)" if mods is None else ", ".join(mods) or "none loaded"))


def path_lines(paths: Optional[Dict[str, Any]]) -> List[str]:
    """A host's paths (diagnose/pathlimits.describe's lines), or why there are none."""
    if not paths:
        return ["unknown (not read)"]
    return _describe(paths)


def _pcie(pc: Dict[str, Any]) -> str:
    return (f"PCIe unknown ({pc['unknown']})" if "unknown" in pc else
            f"{pc['name']} ({pc['GBps']:.1f} GB/s) of {pc['max_name']}")


def _describe(paths: Dict[str, Any]) -> List[str]:
    """One host's paths (diagnose/pathlimits.collect's), a line each."""
    lines = []
    for g in paths["gpus"]:
        pc, nv = g["pcie"], g["nvlink"]
        pcie = _pcie(pc)
        link = ("; NVLink " + (f"{nv['up']} links up x {nv['per_link']:g} GB/s = {nv['GBps']:.0f} GB/s"
                               if nv["up"] else "no link up") + (f", {nv['down']} down" if nv["down"] else "")
                if nv else "")
        nic = f"; nearest NIC {g['nic']} ({g['nic_path']})" if g["nic"] else ""
        lines.append(f"GPU {g['bus']} {g['name'] or '(model unknown)'}: {pcie}{link}{nic}")
    for n in paths["nics"]:
        pc = n["pcie"]
        pcie = _pcie(pc)
        rate = f"{n['rate_gbps']:g} Gb/s" if n["rate_gbps"] else "rate unknown"
        lines.append(f"NIC {n['name']} {n['state']} {rate}: {pcie}")
    for side, what in (("intra", "inside the host"), ("inter", "between hosts")):
        lim = paths[side]
        lines.append(f"limit {what}: " + (f"{lim['name']} = {lim['GBps']:.1f} GB/s" if lim else "unknown"))
    lines += [f"unknown: {u}" for u in paths["unknown"]]
    return lines


def consistency(out: RunOutput, diffs: Sequence[Tuple[str, Mapping[str, Any]]], nhosts: int) -> None:
    """The facts that differ between hosts."""
    out.say("#\n# consistency: " + (f"{counted(len(diffs), 'difference')} between hosts" if diffs else
                                    ("every compared fact is the same on every host"
                                     if nhosts > 1 else "one host, nothing to compare")))
    for label, values in diffs:
        out.say(f"#   DIFFERS {label}: "
                + ", ".join(f"{h}={'(unset)' if v is None else v}" for h, v in values.items()))


def transports(out: RunOutput, skipped: Optional[str],
               pairs: Optional[Mapping[Tuple[str, str], Sequence[str]]], errors: Sequence[str],
               size: int) -> None:
    """The transports NCCL used between every pair of hosts, or why the check did not run."""
    out.say("#\n# NCCL transports (a short all_reduce with NCCL_DEBUG=INFO):")
    if skipped:
        out.say(f"#   not checked: {skipped}")
        return
    for (a, b), used in (pairs or {}).items():
        where = f"{a} (inside)" if a == b else f"{a} <-> {b}"
        out.say(f"#   {where}: {', '.join(used)}")
    if not pairs and not errors:
        out.say("#   no connection between ranks in the logs" +
                (" (one rank: NCCL connects nothing)" if size == 1 else ""))
    out.say(*(f"#   CHECK FAILED TO RUN: {error}" for error in errors))


def findings(out: RunOutput, found: Sequence[Tuple[Optional[str], str]], error: Sequence[bool]) -> None:
    """found: (host or None, text); error[i]: whether found[i] breaks runs."""
    out.say("#\n# findings:" if found else "#\n# findings: none")
    out.say(*(f"#   {host + ': ' if host else ''}{'ERROR ' if bad else ''}{text}"
              for (host, text), bad in zip(found, error)))
    errors = sum(error)
    if found:
        out.say(f"#\n# {counted(errors, 'problem')} that {plural(errors, 'breaks', 'break')} runs (ERROR), "
                f"{counted(len(found) - errors, 'warning')}" + ("; exit 1" if errors else ""))



def diagnostics(out: RunOutput, diag: Mapping[str, Any], lines: Sequence[Any]) -> None:
    """NCCL's own diagnostics (NCCL >= 2.31): the lines it printed, or why they did not run."""
    out.say("#\n# NCCL diagnostics (NCCL_RUN_RAS_DIAGNOSTICS=1, NCCL_RUN_DIAGNOSTICS=1):")
    if not diag["run"]:
        out.say(f"#   not run: {diag['why']}")
        return
    if not lines:
        out.say("#   NCCL printed no NCCL DIAG line")
    out.say(*(f"#   [{x.level}] {x.check}: {x.text}" for x in lines))


def effective(out: RunOutput, params: Mapping[str, Any], where: Sequence[Tuple[str, int]]) -> None:
    """NCCL's effective parameters (NCCL >= 2.30): how many were read where, what differs across
    ranks and from the environment, or one line saying why they were not read."""
    out.say("#\n# NCCL effective parameters (NCCL >= 2.30's parameter API):")
    if not params["read"]:
        out.say(f"#   not read: {params['why']}")
        return

    def rank(r: int) -> str:
        return f"rank {r} ({where[r][0]})" if r < len(where) else f"rank {r}"
    read = [(r, g) for r, g in enumerate(params["ranks"]) if g and g["values"] is not None]
    keys = {k for _, g in read for k in g["values"]}
    files = sorted({f"{g['path']} (NCCL {g['version'] or '?'}, {g['found']})" for _, g in read})
    out.say(f"#   {counted(len(keys), 'parameter')} read on {counted(len(read), 'rank')} from "
            + "; ".join(files))
    if params["why"]:
        out.say(f"#   not read on some ranks: {params['why']}")
    for key, values in params["differ"].items():
        out.say(f"#   DIFFERS {key}: " + "; ".join(f"{v!r} on " + ", ".join(map(rank, rs))
                                                  for v, rs in values.items()))
    if not params["differ"]:
        out.say("#   every effective value is the same on every rank that read them")
    for x in params["ignored"]:
        out.say(f"#   {x['key']}: the environment says {x['env']!r}, NCCL uses {x['effective']!r} "
                f"on {rank(x['rank'])}")

"""From every host's hostfacts.collect() to what matters: differences between hosts and
findings with advice, each (host or None, text) with a severity: ERROR when it breaks runs
or their figures, else WARNING (doctor's exit code comes from the worst)."""
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..launch.netaddr import match_ifname

VERSION_KEYS = ("python", "torch", "nccl", "mpi4py", "mpi")
WARNING, ERROR = "warning", "error"


class Finding(Tuple[Optional[str], str]):
    """(host, text), unpacked as a pair, with .severity (a warning unless given)."""
    severity: str

    def __new__(cls, host: Optional[str], text: str, severity: str = WARNING) -> "Finding":
        self = super().__new__(cls, (host, text))
        self.severity = severity
        return self


def version_findings(diffs: Iterable[Tuple[str, Mapping[str, Any]]]) -> List[Finding]:
    """ERROR for every version that differs between hosts (a rank may fail or disagree)."""
    return [Finding(None, f"{label.split(' ', 1)[1]} differs between hosts (" +
                    ", ".join(f"{h} {v or '-'}" for h, v in values.items()) +
                    "): every host needs the same install", ERROR)
            for label, values in diffs if label.startswith("version ")]


def comparable(facts: Mapping[str, Any]) -> Dict[str, Any]:
    """The facts of one host that should be equal on every host, as {label: value}."""
    out = {**{f"version {k}": facts["versions"].get(k) for k in VERSION_KEYS},
           "GPU model": ", ".join(sorted({g["name"] for g in facts["gpus"]})) or None,
           "GPU count": len(facts["gpus"]), "GPU driver": facts["driver"]}
    out.update((f"variable {k}", v) for k, v in facts["env"].items())
    for p in facts["rdma"]:
        for key in ("state", "rate", "link_layer"):
            out[f"RDMA {p['device']} port {p['port']} {key.replace('_', ' ')}"] = p[key]
    for i in facts["interfaces"]:
        out[f"interface {i['name']} state"] = i["state"]
        out[f"interface {i['name']} speed"] = None if i["speed_mbps"] is None else f"{i['speed_mbps']} Mb/s"
    return out


def differences(per_host: Mapping[str, Mapping[str, Any]]) -> List[Tuple[str, Dict[str, Any]]]:
    """[(label, {host: value})] for every fact that differs between hosts."""
    tables = {h: comparable(f) for h, f in per_host.items()}
    return [(label, values) for label in dict.fromkeys(k for t in tables.values() for k in t)
            for values in [{h: t.get(label) for h, t in tables.items()}]
            if len(set(map(str, values.values()))) > 1]


def findings(per_host: Mapping[str, Mapping[str, Any]], multi_host: Optional[bool] = None) -> List[Finding]:
    """[(host or None, text)]: problems found, each with advice, one line each."""
    multi_host = len(per_host) > 1 if multi_host is None else multi_host
    out = []
    for h, f in per_host.items():
        out += _rdma_findings(h, f, multi_host) + _name_findings(h, f) + _switched_off(h, f["env"]) \
            + _gpu_findings(h, f)
    if len(per_host) > 1:
        out += _slower_than_others(per_host, "interfaces", "up", "speed_mbps",
                                   "fastest network interface", lambda v: f"{v} Mb/s")
        out += _slower_than_others(per_host, "rdma", "ACTIVE", "rate_gbps",
                                   "fastest active RDMA port", lambda v: f"{v:g} Gb/s")
    return out


def _rdma_findings(h: str, f: Mapping[str, Any], multi_host: bool) -> List[Finding]:
    """Host h's RDMA: ports not ACTIVE, no device or modules, RoCE, mixed layers or rates."""
    active = [p for p in f["rdma"] if p["state"] == "ACTIVE"]
    out = [Finding(h, f"RDMA device {p['device']} port {p['port']} is {p['state']}, not "
                      f"ACTIVE: NCCL cannot use it; check the cable and the subnet manager "
                      f"(ibstat, ibv_devinfo)"
                      + ("" if active else "; no port of this host is ACTIVE, so NCCL "
                         "falls back to TCP sockets"), WARNING if active else ERROR)
           for p in f["rdma"] if p["state"] != "ACTIVE"]
    if not f["rdma"] and multi_host:
        out.append(Finding(h, "no RDMA device (/sys/class/infiniband is empty): NCCL will use TCP "
                              "sockets (NET/Socket) between hosts; install the RDMA driver or expect "
                              "a fraction of the bandwidth"))
    if f["rdma"] and f["rdma_modules"] is not None and not {"ib_uverbs", "rdma_ucm"} & set(f["rdma_modules"]):
        out.append(Finding(h, "RDMA devices present but ib_uverbs/rdma_ucm not loaded: user "
                              "space (NCCL) cannot open them; modprobe ib_uverbs rdma_ucm", ERROR))
    layers = {p["link_layer"] for p in active}
    if "Ethernet" in layers:
        out.append(Finding(h, "RoCE (RDMA over Ethernet): every host must use the same RoCE version "
                              "and GID index (NCCL_IB_GID_INDEX); check lossless Ethernet (PFC/ECN)"))
    if len(layers) > 1:
        out.append(Finding(h, f"active RDMA ports mix link layers ({', '.join(sorted(layers))}): "
                              f"NCCL may pair ports that cannot talk; set NCCL_IB_HCA"))
    rates = {p["rate_gbps"] for p in active if p["rate_gbps"]}
    if len(rates) > 1:
        each = ", ".join(f"{r:g}" for r in sorted(rates))
        out.append(Finding(h, f"active RDMA ports run at different rates ({each} Gb/s): NCCL's rings go "
                              f"at the slowest; check cables or set NCCL_IB_HCA"))
    return out


def _name_findings(h: str, f: Mapping[str, Any]) -> List[Finding]:
    """Variables of host h that name none of its interfaces or RDMA devices."""
    names = [i["name"] for i in f["interfaces"]] + ["lo"]
    out = [Finding(h, f"{var}={spec} names no interface of this host (it has "
                      f"{', '.join(names[:-1]) or 'none'}): initialization will "
                      f"fail; fix the name on this host", ERROR)
           for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
           if (spec := f["env"].get(var)) and not match_ifname(spec, names)]
    hca = f["env"].get("NCCL_IB_HCA")
    devices = sorted({p["device"] for p in f["rdma"]})
    if hca and not match_ifname(",".join(x.split(":")[0] for x in hca.split(",")), devices):
        out.append(Finding(h, f"NCCL_IB_HCA={hca} names no RDMA device of this host (it has "
                              f"{', '.join(devices) or 'none'}): NCCL falls back to sockets "
                              f"or fails; fix the name on this host", ERROR if devices else WARNING))
    return out


def _switched_off(h: str, env: Mapping[str, str]) -> List[Finding]:
    """NCCL transports that host h's variables turn off (P2P, InfiniBand/RoCE, SHM)."""
    return [Finding(h, f"{var}={env[var]} is set: {what}; unset it unless on purpose") for var, what in (
        ("NCCL_P2P_DISABLE", "GPU peer-to-peer (NVLink/PCIe P2P) is off: traffic inside the host "
                             "goes through host memory"),
        ("NCCL_IB_DISABLE", "InfiniBand/RoCE is off: NCCL uses TCP sockets between hosts"),
        ("NCCL_SHM_DISABLE", "shared-memory transport is off"))
        if env.get(var, "0").strip() not in ("", "0")]


def _gpu_findings(h: str, f: Mapping[str, Any]) -> List[Finding]:
    """Host h's GPUs joined by PCIe only, and GPU tools that failed where GPUs are expected."""
    out = []
    if len(f["gpus"]) > 1 and f["gpu_links"] and "NV#" not in f["gpu_links"]:
        out.append(Finding(h, f"{len(f['gpus'])} GPUs joined by PCIe only (no NVLink in nvidia-smi "
                              f"topo -m: {', '.join(f['gpu_links'])}): GPU-to-GPU traffic is "
                              f"limited to PCIe bandwidth"))
    return out + [Finding(h, f"{error}: GPU facts (models, driver, topology) unknown")
                  for error in f["tool_errors"] if f["versions"].get("nccl") or f["gpus"]]


def _slower_than_others(per_host: Mapping[str, Mapping[str, Any]], ports: str, state: str, rate: str,
                        what: str, fmt: Callable[[Optional[float]], str]) -> List[Finding]:
    """Hosts whose fastest port in that state (of f[ports], its rate) is below another's."""
    values = {h: max((p[rate] for p in f[ports] if p["state"] == state and p[rate]), default=None)
              for h, f in per_host.items()}
    top = max((v for v in values.values() if v), default=None)
    return [Finding(h, f"{what} is {fmt(v)}, the other hosts reach {fmt(top)}: this host's "
                       f"links limit every collective; check its NIC, cable and switch port")
            for h, v in values.items() if v and v < top]


def transport_findings(pairs: Mapping[Tuple[str, str], Sequence[str]],
                       per_host: Mapping[str, Mapping[str, Any]]) -> List[Finding]:
    """Findings from the transports NCCL used: sockets where RDMA exists, no P2P inside hosts."""
    out = []
    for (a, b), used in pairs.items():
        if a != b and "NET/Socket" in used and (per_host.get(a, {}).get("rdma") or
                                                per_host.get(b, {}).get("rdma")):
            out.append(Finding(None, f"NCCL used TCP sockets (NET/Socket) between {a} and {b} "
                                     f"although RDMA devices exist: check NCCL_IB_HCA, "
                                     f"NCCL_IB_DISABLE and the ib_uverbs module", ERROR))
        if a == b and "SHM" in used and not any(t.startswith("P2P") for t in used):
            out.append(Finding(a, "NCCL moved data between this host's GPUs through host memory "
                                  "(SHM), not P2P: check NCCL_P2P_DISABLE, ACS/IOMMU settings and "
                                  "nvidia-smi topo -m"))
    return out

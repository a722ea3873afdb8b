"""The physical limit of every path a host's data can cross, read from the host: each GPU's and
NIC's PCIe link (current and maximum speed and width, from sysfs), each GPU's NVLink links
(`nvidia-smi nvlink -s`), which NIC each GPU is closest to, and the NICs' rates (hostfacts).
From them the limit of the path inside the host and of the one between hosts, in GB/s with a
name (`8 x 18 NVLink 4 links`, `PCIe Gen4 x16`, `4 x 400 Gb/s NICs`), and findings on links
below their rating. What cannot be read is "unknown" with the reason, never guessed.

Files are read under a root folder; the test switch hostfacts:RANK:DIR (launch/faults.py)
puts a fabricated tree there and files in place of nvidia-smi's answers."""
import os
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ..launch import faults
from . import hostfacts
from .findings import ERROR, WARNING, Finding

if TYPE_CHECKING:
    from ..launch.session import Session

PCI = "sys/bus/pci/devices"
# PCIe transfer rate (GT/s) -> generation and payload bytes a lane moves per transfer (line code)
PCIE_GENS = {2.5: (1, 8 / 10), 5.0: (2, 8 / 10), 8.0: (3, 128 / 130), 16.0: (4, 128 / 130),
             32.0: (5, 128 / 130), 64.0: (6, 242 / 256)}
# NVLink generation by GPU family (nvidia-smi names the model, not the generation)
NVLINK_GENS = (("GB200", 5), ("GB300", 5), ("B200", 5), ("B300", 5), ("B100", 5), ("H100", 4),
               ("H200", 4), ("H800", 4), ("H20", 4), ("GH200", 4), ("A100", 3), ("A800", 3),
               ("V100", 2))
GPU_CLASSES = ("0x0300", "0x0302", "0x1200")       # VGA, 3D controller, processing accelerator
GPU_VENDORS = ("0x10de", "0x1002")                  # NVIDIA, AMD


def source(rank: int, root: str = "/") -> Tuple[str, Optional[str]]:
    """(sysfs root, folder of files standing in for nvidia-smi or None): the host's own, or
    the test switch hostfacts:RANK:DIR's fabricated tree."""
    fake = faults.get("hostfacts", rank)
    return (fake, fake) if fake else (root, None)


def pcie_rate(text: Optional[str]) -> Optional[float]:
    """GT/s of a link speed as sysfs writes it ('16.0 GT/s PCIe', '8 GT/s'); None: unknown."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


def pcie_GBps(rate: Optional[float], width: Optional[int]) -> Optional[float]:
    """A link's payload bandwidth in GB/s each way (rate GT/s per lane, line code applied)."""
    if rate is None or not width or rate not in PCIE_GENS:
        return None
    return rate * PCIE_GENS[rate][1] / 8 * width


def pcie_name(rate: Optional[float], width: Optional[int]) -> str:
    gen = PCIE_GENS.get(rate or 0.0, (None,))[0]
    return f"PCIe Gen{gen or '?'} x{width or '?'}"


def pcie_link(root: str, bus: str) -> Dict[str, Any]:
    """One PCI device's link: current and maximum rate, width, GB/s; or {'unknown': why}."""
    d = os.path.join(root, PCI, bus)
    read = {k: hostfacts.read_text(os.path.join(d, k)) for k in
            ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")}
    missing = [k for k, v in read.items() if v is None]
    if missing:
        return {"unknown": f"no {', '.join(missing)} under /{PCI}/{bus}"}
    rate, max_rate = pcie_rate(read["current_link_speed"]), pcie_rate(read["max_link_speed"])
    width, max_width = hostfacts.number(read["current_link_width"]), hostfacts.number(read["max_link_width"])
    if rate not in PCIE_GENS or max_rate not in PCIE_GENS or not width or not max_width:
        return {"unknown": f"/{PCI}/{bus} reads {read['current_link_speed']} x{read['current_link_width']}"
                           f" of {read['max_link_speed']} x{read['max_link_width']}: not a PCIe rate and "
                           f"width"}
    return {"rate": rate, "width": width, "max_rate": max_rate, "max_width": max_width,
            "name": pcie_name(rate, width), "max_name": pcie_name(max_rate, max_width),
            "GBps": pcie_GBps(rate, width), "max_GBps": pcie_GBps(max_rate, max_width)}


def device_path(root: str, bus: str) -> List[str]:
    """The bridges above a PCI device, root complex first (its sysfs path's PCI parts)."""
    real = os.path.realpath(os.path.join(root, PCI, bus))
    return [p for p in real.split(os.sep) if p.startswith("pci") or re.match(r"[0-9a-f]{4}:", p)]


def closeness(a: List[str], b: List[str]) -> str:
    """How two devices' paths meet, in nvidia-smi topo's words: PIX/PXB (a PCIe switch), PHB (the
    root complex) or SYS (across it)."""
    shared = 0
    for x, y in zip(a, b):
        if x != y:
            break
        shared += 1
    return "SYS" if shared == 0 else "PHB" if shared == 1 else "PXB"


def parse_nvlink(text: Optional[str]) -> Dict[str, Dict[str, Any]]:
    """`nvidia-smi nvlink -s` -> {bus id or 'GPU n': {'up': n, 'down': n, 'per_link': GB/s,
    'GBps': the active links together}}."""
    out: Dict[str, Dict[str, Any]] = {}
    cur: Optional[Dict[str, Any]] = None
    for line in (text or "").splitlines():
        if m := re.match(r"\s*GPU (\d+):", line):
            cur = out.setdefault(f"GPU {m.group(1)}", {"up": 0, "down": 0, "speeds": []})
        elif cur is not None and (m := re.match(r"\s*Link \d+:\s*(.*)", line)):
            speed = re.match(r"([\d.]+)\s*GB/s", m.group(1).strip())
            if speed:
                cur["up"] += 1
                cur["speeds"].append(float(speed.group(1)))
            else:
                cur["down"] += 1
    for g in out.values():
        speeds = g.pop("speeds")
        g["per_link"] = min(speeds) if speeds else None
        g["GBps"] = sum(speeds) or None
    return out


def _pci_devices(root: str) -> List[str]:
    return hostfacts.listdir(os.path.join(root, PCI))


def _is_gpu(root: str, bus: str) -> bool:
    d = os.path.join(root, PCI, bus)
    return (hostfacts.read_text(os.path.join(d, "vendor")) or "") in GPU_VENDORS and \
        (hostfacts.read_text(os.path.join(d, "class")) or "")[:6] in GPU_CLASSES


def _bus_of(root: str, sysclass: str, name: str) -> Optional[str]:
    """The PCI address of a NIC (/sys/class/infiniband/NAME or /sys/class/net/NAME), if any."""
    real = os.path.realpath(os.path.join(root, sysclass, name, "device"))
    base = os.path.basename(real)
    return base if re.match(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", base) and \
        os.path.isdir(os.path.join(root, PCI, base)) else None


def _bus_key(bus: str) -> str:
    """'00000000:18:00.0' (nvidia-smi) and '0000:18:00.0' (sysfs) alike, lower case."""
    dom, _, rest = bus.lower().partition(":")
    return f"{int(dom, 16):04x}:{rest}" if rest else bus.lower()


def nvlink_gen(model: Optional[str]) -> Optional[int]:
    return next((g for key, g in NVLINK_GENS if key in (model or "")), None)


def collect(root: str = "/", fake: Optional[str] = None) -> Dict[str, Any]:
    """This host's paths: gpus, nics (each with its PCIe link), unknown (why), intra and inter
    limits ({'GBps', 'name'} or None)."""
    unknown: List[str] = []
    buses = _pci_devices(root)
    gpu_bus = [b for b in buses if _is_gpu(root, b)]
    gpus = _gpus(root, gpu_bus, fake, unknown)
    ports = hostfacts.rdma_ports(root)
    nics = _nics(root, ports)
    _nearest(root, gpus, nics)
    unknown += _pcie_unknown(root, buses, [x for x in gpus + nics if x.get("bus")])
    if not gpu_bus:
        unknown.append("GPUs: none found (no NVIDIA or AMD display or accelerator device on the PCI bus)")
    return {"gpus": gpus, "nics": nics, "unknown": unknown,
            "intra": intra_limit(gpus), "inter": inter_limit(hostfacts.link_rates(root, ports))}


def _gpus(root: str, gpu_bus: List[str], fake: Optional[str], unknown: List[str]) -> List[Dict[str, Any]]:
    """Each GPU on the bus: its model and NVLink (nvidia-smi's), its PCIe link; why not, into unknown."""
    # nvidia-smi takes tens of ms to start: asked only where an NVIDIA GPU is on the bus
    nvidia = any(hostfacts.read_text(os.path.join(root, PCI, b, "vendor")) == GPU_VENDORS[0] for b in gpu_bus)
    text, why = hostfacts.tool("gpus", fake) if nvidia or fake else (None, None)
    names = {_bus_key(p[2]): p[0] for line in (text or "").splitlines()
             for p in [[x.strip() for x in line.split(",")]] if len(p) >= 3}
    nvlinks: Dict[str, Dict[str, Any]] = {}
    if nvidia:
        nv_text, nv_why = hostfacts.tool("nvlink", fake) if why is None else (None, why)
        nvlinks = parse_nvlink(nv_text)
        if nv_why:
            unknown.append(f"NVLink and GPU models: {nv_why}")
    order = list(names)          # nvidia-smi's GPU n is the n-th of its query
    return [{"bus": b, "name": names.get(b), "pcie": pcie_link(root, b),
             "nvlink": nvlinks.get(f"GPU {order.index(b)}") if b in order else None}
            for b in gpu_bus]


def _nics(root: str, ports: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The active RDMA ports, else the network interfaces, each with its PCIe link."""
    nics: List[Dict[str, Any]] = []
    for p in ports:
        bus = _bus_of(root, "sys/class/infiniband", p["device"])
        nics.append({"name": f"{p['device']}/{p['port']}", "state": p["state"], "rate_gbps": p["rate_gbps"],
                     "bus": bus, "pcie": pcie_link(root, bus) if bus else {"unknown": "no PCI device"}})
    if not nics:
        for i in hostfacts.interfaces(root):
            bus = _bus_of(root, "sys/class/net", i["name"])
            nics.append({"name": i["name"], "state": i["state"],
                         "rate_gbps": i["speed_mbps"] / 1000 if i["speed_mbps"] else None, "bus": bus,
                         "pcie": pcie_link(root, bus) if bus else {"unknown": "no PCI device"}})
    return nics


def _nearest(root: str, gpus: List[Dict[str, Any]], nics: List[Dict[str, Any]]) -> None:
    """Each GPU's nearest NIC and the path to it (PXB, PHB, SYS), into the GPU's record."""
    paths = {n["bus"]: device_path(root, n["bus"]) for n in nics if n["bus"]}
    for g in gpus:
        mine = device_path(root, g["bus"])
        near = sorted(((closeness(mine, route), n["name"]) for n in nics if (route := paths.get(n["bus"]))),
                      key=lambda x: ("PXB", "PHB", "SYS").index(x[0]))
        g["nic"], g["nic_path"] = (near[0][1], near[0][0]) if near else (None, None)


def _pcie_unknown(root: str, buses: List[str], devices: List[Dict[str, Any]]) -> List[str]:
    """Why no PCIe link is known: virtual devices (no current_link_speed), or the devices' reasons."""
    def virtual(listed: List[str]) -> bool:
        return bool(listed) and not any(os.path.exists(os.path.join(root, PCI, b, "current_link_speed"))
                                        for b in listed)
    if devices and all("unknown" in x["pcie"] for x in devices):
        listed = _pci_devices(root)
        return [f"PCIe links: none of the {len(listed)} PCI devices under /{PCI} has "
                f"current_link_speed (virtual devices, as in most VMs)" if virtual(listed)
                else "PCIe links: " + "; ".join(x["pcie"]["unknown"] for x in devices[:2])]
    if not devices and virtual(buses):
        return [f"PCIe links: none of the {len(buses)} PCI devices under /{PCI} has "
                f"current_link_speed (virtual devices, as in most VMs)"]
    return []


def intra_limit(gpus: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Inside the host: the slowest GPU's NVLink links together, else its PCIe link (GB/s each
    way), named."""
    nv = [g for g in gpus if g["nvlink"] and g["nvlink"]["GBps"]]
    if nv and len(nv) == len(gpus):
        slow = min(nv, key=lambda g: g["nvlink"]["GBps"])
        gen = nvlink_gen(slow["name"])
        return {"GBps": slow["nvlink"]["GBps"], "via": "NVLink",
                "name": f"{len(gpus)} x {slow['nvlink']['up']} NVLink{f' {gen}' if gen else ''} links"}
    pcie = [g for g in gpus if "GBps" in g["pcie"]]
    if pcie and len(pcie) == len(gpus):
        slow = min(pcie, key=lambda g: g["pcie"]["GBps"])
        return {"GBps": slow["pcie"]["GBps"], "via": "PCIe", "name": f"{slow['pcie']['name']}"}
    return None


def inter_limit(rates: List[float]) -> Optional[Dict[str, Any]]:
    """Between hosts: the NICs hostfacts.link_rates counts (active RDMA ports, else interfaces
    up), their rates (Gbit/s) together."""
    if not rates:
        return None
    each = f"{len(rates)} x {rates[0]:g} Gb/s" if len(set(rates)) == 1 else \
        " + ".join(f"{r:g}" for r in rates) + " Gb/s"
    return {"GBps": sum(rates) / 8, "via": "NICs",
            "name": f"{each} NIC{'s' if len(rates) > 1 else ''}"}


def limit(paths: Dict[str, Dict[str, Any]], multi_host: bool) -> Tuple[Optional[Dict[str, Any]], str]:
    """(the limit a job's busbw is held against, or None; why none): the slowest host's path
    between hosts with several, inside the host with one."""
    side = "inter" if multi_host else "intra"
    known = {h: p[side] for h, p in paths.items() if p and p.get(side)}
    if not paths or len(known) < len(paths):
        missing = [h for h, p in paths.items() if not (p and p.get(side))]
        what = "NIC rate" if multi_host else "NVLink or PCIe link of every GPU"
        return None, f"{', '.join(missing) or 'no host'}: {what} unknown"
    host, lim = min(known.items(), key=lambda kv: kv[1]["GBps"])
    return dict(lim, host=host), ""


def findings(host: str, paths: Optional[Dict[str, Any]]) -> List[Finding]:
    """Links below their rating: a PCIe link below its maximum or below its peers', NVLink links
    down or fewer than the host's other GPUs have."""
    if not paths:
        return []
    out = []
    for kind, devices in (("GPU", paths["gpus"]), ("NIC", paths["nics"])):
        known = [d for d in devices if "GBps" in d["pcie"]]
        best = max((d["pcie"]["GBps"] for d in known), default=None)
        for d in known:
            pc, name = d["pcie"], f"{kind} {d['name'] if kind == 'NIC' else d['bus']}"
            if pc["GBps"] < pc["max_GBps"]:
                out.append(Finding(host, f"{name}'s PCIe link runs at {pc['name']}, below its maximum "
                                         f"{pc['max_name']} ({pc['GBps']:.1f} of {pc['max_GBps']:.1f} GB/s): "
                                         f"a downtrained link; reseat the card, check the slot, riser and "
                                         f"the BIOS PCIe settings"))
            elif best and pc["GBps"] < best:
                out.append(Finding(host, f"{name}'s PCIe link is {pc['name']} ({pc['GBps']:.1f} GB/s), its "
                                         f"peers reach {best:.1f} GB/s: it sits in a slower slot"))
    nv = [g for g in paths["gpus"] if g["nvlink"]]
    most = max((g["nvlink"]["up"] for g in nv), default=0)
    for g in nv:
        up, down = g["nvlink"]["up"], g["nvlink"]["down"]
        if down or up < most:
            out.append(Finding(host, f"GPU {g['bus']} has {up} NVLink links up"
                                     + (f", {down} down" if down else "")
                                     + (f", the host's other GPUs {most}" if up < most else "")
                                     + ": traffic through it is slower; check nvidia-smi nvlink -e and "
                                       "the NVSwitch/fabric manager", ERROR if not up else WARNING))
    return out


def section(per_host: Dict[str, Optional[Dict[str, Any]]], multi_host: bool) -> Dict[str, Any]:
    """The document's `path_limits`: every host's paths, the limit a busbw is held against (or
    why none), the findings on links below their rating."""
    known = {h: p for h, p in per_host.items() if p is not None}
    lim, why = limit(known, multi_host)
    return {"hosts": known, "limit": lim, "why": why or None,
            "findings": [{"host": f[0], "text": f[1], "severity": f.severity}
                         for h, p in known.items() for f in findings(h, p)]}


def gather(session: "Session", root: str = "/") -> Dict[str, Optional[Dict[str, Any]]]:
    """{host: its paths} on rank 0 ({} elsewhere): read by each host's first local rank only."""
    mine = collect(*source(session.rank, root)) if session.local_rank == 0 else None
    got = session.comm.gather(mine, root=0) or []
    assert session.hosts is not None
    return {session.hosts[r]: p for r, p in enumerate(got) if p is not None}

"""One host's facts for `doctor` and its line rate, which `run`, `check` and `verify` hold
figures against; its ports' error counters and link state, read before and after each of
`check`'s rounds (only error counters: byte and packet counts move on every healthy link).
Files are read under a root folder (tests fabricate a sysfs/proc tree); a missing or failing
tool is recorded, never raised."""
import os
import shutil
import subprocess
from typing import (TYPE_CHECKING, Any, Callable, Collection, Dict, Iterable, List, Mapping, Optional,
                    Sequence, Set, Tuple, TypeVar, overload)

from . import rankfacts

if TYPE_CHECKING:
    from ..launch.session import Session

RDMA_MODULES = ("ib_core", "ib_uverbs", "rdma_ucm", "rdma_cm", "mlx5_ib", "mlx4_ib", "irdma",
                "bnxt_re", "efa", "qedr", "rdma_rxe", "siw", "nvidia_peermem", "nv_peer_mem")
TIMEOUT = 20
IB_ERRORS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
             "port_xmit_discards", "port_rcv_remote_physical_errors",
             "port_rcv_switch_relay_errors", "local_link_integrity_errors",
             "excessive_buffer_overrun_errors", "port_xmit_constraint_errors",
             "port_rcv_constraint_errors", "VL15_dropped")
NET_ERRORS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped", "rx_crc_errors",
              "rx_frame_errors", "rx_fifo_errors", "tx_fifo_errors", "rx_missed_errors",
              "rx_over_errors", "tx_carrier_errors", "tx_aborted_errors")


def read_text(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


Number = TypeVar("Number", int, float)


@overload
def number(text: Optional[str]) -> Optional[int]: ...
@overload
def number(text: Optional[str], kind: Callable[[str], Number]) -> Optional[Number]: ...


def number(text: Optional[str], kind: Callable[[str], float] = int) -> Optional[float]:
    """text as a number of kind, None where it is none."""
    if text is None:
        return None
    try:
        return kind(text)
    except (TypeError, ValueError):
        return None


def interfaces(root: str) -> List[Dict[str, Any]]:
    """[{'name', 'state', 'speed_mbps'}] from /sys/class/net (loopback left out)."""
    return [{"name": name, "state": p["state"], "speed_mbps": speed if speed and speed > 0 else None}
            for name, p in snapshot(root, counters=False).items() if "/" not in name
            for speed in [number(p["speed"])]]


def rdma_ports(root: str) -> List[Dict[str, Any]]:
    """[{'device', 'port', 'state', 'rate', 'rate_gbps', 'link_layer'}] from /sys/class/infiniband."""
    base = os.path.join(root, "sys/class/infiniband")
    return [{"device": dev, "port": port, "state": p["state"], "rate": p["speed"],    # "200 Gb/sec (4X HDR)"
             "rate_gbps": number(p["speed"].split()[0] if p["speed"] else None, float),
             "link_layer": read_text(os.path.join(base, dev, "ports", port, "link_layer")) or "unknown"}
            for name, p in snapshot(root, counters=False).items() if "/" in name
            for dev, port in [name.split("/")]]


def link_rates(root: str = "/", ports: Optional[Iterable[Mapping[str, Any]]] = None) -> List[float]:
    """This host's link rates in Gbit/s: its active RDMA ports' (rdma_ports(root) unless given),
    else its up interfaces'."""
    rates = [p["rate_gbps"] for p in (rdma_ports(root) if ports is None else ports)
             if p["state"] == "ACTIVE" and p["rate_gbps"]]
    return rates or [i["speed_mbps"] / 1000 for i in interfaces(root)
                     if i["state"] == "up" and i["speed_mbps"]]


def line_rate(root: str = "/") -> Optional[float]:
    """This host's line rate in Gbit/s: the fastest of its link rates (None when unknown)."""
    return max(link_rates(root), default=None)


def total_line_rate(root: str = "/") -> Optional[float]:
    """All of this host's links together in Gbit/s, which no traffic can exceed (or None)."""
    return sum(link_rates(root)) or None


def rdma_modules(root: str) -> Optional[List[str]]:
    """RDMA-related kernel modules loaded, from /proc/modules (None if unreadable)."""
    text = read_text(os.path.join(root, "proc/modules"))
    if text is None:
        return None
    loaded = {line.split()[0] for line in text.splitlines() if line.strip()}
    return [m for m in RDMA_MODULES if m in loaded]


def run_tool(argv: Sequence[str], timeout: float = TIMEOUT) -> Tuple[Optional[str], Optional[str]]:
    """(stdout, None) or (None, why): never raises for a missing or failing tool."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found on PATH"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"{' '.join(argv)} did not answer within {timeout} s"
    except OSError as exc:
        return None, f"{' '.join(argv)} failed: {exc.strerror}"
    if done.returncode != 0:
        err = (done.stderr or done.stdout).strip().splitlines()
        return None, f"{' '.join(argv)} exited {done.returncode}" + (f": {err[0]}" if err else "")
    return done.stdout, None


# nvidia-smi's answers that the test switch hostfacts:RANK:DIR replaces with DIR's files
TOOL_ARGV = {"gpus": ["nvidia-smi", "--query-gpu=name,driver_version,pci.bus_id", "--format=csv,noheader"],
             "nvlink": ["nvidia-smi", "nvlink", "-s"], "topo": ["nvidia-smi", "topo", "-m"]}
TOOL_FILES = {"gpus": "nvidia-smi-gpus.csv", "nvlink": "nvidia-smi-nvlink.txt", "topo": "nvidia-smi-topo.txt"}


def tool(kind: str, fake: Optional[str] = None) -> Tuple[Optional[str], Optional[str]]:
    """(nvidia-smi's answer for kind, None) or (None, why): the tool's, or fake's file (a
    folder the test switch hostfacts:RANK:DIR names)."""
    if fake is None:
        return run_tool(TOOL_ARGV[kind])
    text = read_text(os.path.join(fake, TOOL_FILES[kind]))
    return (text, None) if text is not None else (None, f"{TOOL_ARGV[kind][0]} not found on PATH")


def gpu_links(topology: Optional[str]) -> Set[str]:
    """Link kinds between GPUs from `nvidia-smi topo -m`: {'NV#', 'PIX', 'PHB', 'SYS', ...}."""
    rows = [line.split() for line in (topology or "").splitlines() if line.strip()]
    ngpu = sum(1 for h in rows[0] if h.startswith("GPU")) if rows else 0
    # a GPU's row: its links to the GPUs of the header, X itself
    return {"NV#" if cell.startswith("NV") else cell for cells in rows[1:]
            if cells[0].startswith("GPU") and cells[0] != "GPU" for cell in cells[1:1 + ngpu] if cell != "X"}


def collect(session: "Session", root: str = "/", fake: Optional[str] = None) -> Dict[str, Any]:
    """This rank's host facts (every rank collects; rank 0 keeps one per host): GPU models and
    driver from nvidia-smi, their topology from nvidia-smi topo -m, tool_errors; fake: the
    folder whose files stand in for nvidia-smi (test switch hostfacts:RANK:DIR)."""
    text, error = tool("gpus", fake)
    gpus = [parts for line in (text or "").strip().splitlines()
            for parts in [[p.strip() for p in line.split(",")]] if len(parts) >= 3]
    topo, error = tool("topo", fake) if not error else (None, error)
    topo = topo.rstrip() if topo else None
    return {"host": session.hostname, "rank": session.rank, "root": root,
            "versions": rankfacts.versions(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "env": rankfacts.net_env(),
            "interfaces": interfaces(root), "rdma": rdma_ports(root),
            "rdma_modules": rdma_modules(root),
            "gpus": [{"name": name, "bus_id": bus} for name, _, bus, *_ in gpus],
            "driver": gpus[-1][1] if gpus else None, "topology": topo,
            "gpu_links": sorted(gpu_links(topo)), "tool_errors": [error] if error else []}


def snapshot(root: str = "/", counters: bool = True) -> Dict[str, Dict[str, Any]]:
    """{port: {'state', 'speed' as written, 'counters'}}, port 'mlx5_0/1' (device/port) or 'eth1',
    state 'ACTIVE' of an RDMA port's '4: ACTIVE'; the error counters {} unless `counters`."""
    ib, net = os.path.join(root, "sys/class/infiniband"), os.path.join(root, "sys/class/net")
    # (port, its folder, the counters' folder, their names, the state and speed files)
    ports = [(f"{dev}/{port}", os.path.join(ib, dev, "ports", port), "counters", IB_ERRORS,
              "state", "rate") for dev in listdir(ib) for port in listdir(os.path.join(ib, dev, "ports"))]
    ports += [(name, os.path.join(net, name), "statistics", NET_ERRORS, "operstate", "speed")
              for name in listdir(net) if name != "lo"]
    return {port: {"state": (read_text(os.path.join(d, state)) or "unknown").split(":")[-1].strip(),
                   "speed": read_text(os.path.join(d, speed)),
                   "counters": {c: v for c in (names if counters else ())
                                for v in [number(read_text(os.path.join(d, folder, c)))] if v is not None}}
            for port, d, folder, names, state, speed in ports}


def delta(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
          ) -> List[Dict[str, Any]]:
    """[{'port', 'what', 'moved' or 'from'/'to'}]: what rose, changed, came or went."""
    moved = []
    for port in sorted(set(before) | set(after)):
        a, b = before.get(port), after.get(port)
        if a is None or b is None:
            moved.append({"port": port, "what": "port", "from": "absent" if a is None else "present",
                          "to": "absent" if b is None else "present"})
            continue
        moved += [{"port": port, "what": key, "from": a[key], "to": b[key]}
                  for key in ("state", "speed") if a[key] != b[key]]
        moved += [{"port": port, "what": name, "moved": value - old}
                  for name, value in b["counters"].items()
                  if (old := a["counters"].get(name)) is not None and value > old]
    return moved


def describe_changes(changes: Iterable[Mapping[str, Any]]) -> str:
    """'eth1 rx_dropped +3, eth1 state up -> down' (empty text for none)."""
    return ", ".join(f"{c['port']} {c['what']} +{c['moved']}" if "moved" in c
                     else f"{c['port']} {c['what']} {c['from']} -> {c['to']}" for c in changes)


def on_ports(changes: Iterable[Dict[str, Any]], ports: Optional[Collection[str]]) -> List[Dict[str, Any]]:
    """The changes on the named ports (all of them when ports is empty or None)."""
    return [c for c in changes if not ports or c["port"] in ports or c["port"].split("/")[0] in ports]

"""What others published for a platform: the figures of the package's data/published.json
(vendors' health-check floors, maintainers' expected values, published nccl-tests runs), each
with its source, matched to the platform a job ran on (GPU model, GPUs per host, one host or
several) and a collective; the range `run` and `check` print, and `check --expect published`'s
floors."""
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..measure.sizes import format_size

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "published.json")
PLATFORM_KEYS = ("gpu", "form", "gpus_per_host", "intra", "nic_gbps", "nics", "hosts")
KINDS = ("threshold", "expected", "measured")
Entry = Dict[str, Any]


def problems(entry: Any) -> List[str]:
    """What an entry lacks: a platform, collective, positive busbw_GBps with unit GB/s, a kind,
    and a source with url and date ([] when it is whole)."""
    if not isinstance(entry, dict):
        return ["not an object"]
    return [why for rule in _RULES if (why := rule(entry))]


def _platform(entry: Entry) -> Optional[str]:
    plat = entry.get("platform")
    if not isinstance(plat, dict) or set(PLATFORM_KEYS) - set(plat):
        return f"platform needs {', '.join(PLATFORM_KEYS)}"
    if not (isinstance(plat["gpu"], str) and isinstance(plat["gpus_per_host"], int)
            and isinstance(plat["hosts"], int) and plat["hosts"] >= 1):
        return "platform's gpu is a name, gpus_per_host and hosts whole numbers"
    return None


def _busbw(entry: Entry) -> Optional[str]:
    bw = entry.get("busbw_GBps")
    if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not bw > 0:
        return "busbw_GBps must be a number above 0"
    return None


def _size(entry: Entry) -> Optional[str]:
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        return "size must be bytes or null"
    return None


def _source(entry: Entry) -> Optional[str]:
    src = entry.get("source")
    if not isinstance(src, dict) or not all(isinstance(src.get(k), str) and src[k]
                                            for k in ("name", "url", "date")):
        return "source needs name, url and date"
    return None


_RULES: Tuple[Callable[[Entry], Optional[str]], ...] = (
    _platform,
    lambda e: None if isinstance(e.get("collective"), str) else "no collective",
    _busbw,
    lambda e: None if e.get("unit") == "GB/s" else "unit must be GB/s (nccl-tests' busbw)",
    lambda e: None if e.get("kind") in KINDS else f"kind must be one of {', '.join(KINDS)}",
    _size, _source)


def load(path: str = PATH) -> List[Entry]:
    """The entries of the data file; ValueError naming the first entry that lacks something."""
    with open(path) as f:
        doc = json.load(f)
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: no list of entries")
    for i, e in enumerate(entries):
        if bad := problems(e):
            raise ValueError(f"{path}: entry {i + 1}: {'; '.join(bad)}")
    return entries


def platform(models: Sequence[Optional[str]], gpus_per_host: int, hosts: int) -> Dict[str, Any]:
    """The platform a job ran on: its hosts' GPU model (None: none or several), GPUs per host,
    hosts."""
    names = {m for m in models if m}
    return {"gpu": names.pop() if len(names) == 1 else None, "gpus_per_host": gpus_per_host, "hosts": hosts}


def _same_gpu(entry_gpu: str, form: str, model: str) -> bool:
    if not re.search(rf"(?<![A-Za-z0-9]){re.escape(entry_gpu)}(?![A-Za-z0-9])", model):
        return False
    return ("PCIe" in model) == form.startswith("PCIe")


def match(entries: Sequence[Entry], plat: Dict[str, Any], collective: str) -> List[Entry]:
    """The entries for this platform and collective: the same GPU model and count per host, one
    host against one-host figures, several against figures of the same number of hosts."""
    if not plat.get("gpu"):
        return []
    return [e for e in entries if e["collective"] == collective
            and _same_gpu(e["platform"]["gpu"], e["platform"]["form"] or "", plat["gpu"])
            and e["platform"]["gpus_per_host"] == plat["gpus_per_host"]
            and e["platform"]["hosts"] == plat["hosts"]]


def platform_text(plat: Dict[str, Any]) -> str:
    """'8 x NVIDIA H100 80GB HBM3, one host'; 'no GPUs, ...'; 'GPUs of several models, ...'."""
    n = plat["gpus_per_host"]
    gpus = (f"{n} x {plat['gpu']}" if plat["gpu"] and n else "no GPUs" if not n and not plat["gpu"]
            else "GPUs of several models or counts")
    return f"{gpus}, {'one host' if plat['hosts'] == 1 else str(plat['hosts']) + ' hosts'}"


def _label(e: Entry) -> str:
    return str(e["algorithm"] or e["kind"])


def range_text(found: Sequence[Entry], plat: Dict[str, Any], collective: str) -> str:
    """'published for 8 x H100 SXM5 (NVLink 4 (NVSwitch)), one host, all_reduce: 370 (Ring) -
    480 (NVLS) GB/s at 8 GiB, 16 GiB (3 sources)', or what nothing matched."""
    if not found:
        return (f"published: nothing matches {platform_text(plat)}, {collective} "
                f"(the package's data file; docs/reading-results.md)")
    p = found[0]["platform"]
    lo, hi = min(found, key=lambda e: e["busbw_GBps"]), max(found, key=lambda e: e["busbw_GBps"])
    span = (f"{lo['busbw_GBps']:g} ({_label(lo)})" if lo is hi else
            f"{lo['busbw_GBps']:g} ({_label(lo)}) - {hi['busbw_GBps']:g} ({_label(hi)})")
    sizes = sorted({e["size"] for e in found if e["size"]})
    peak = any(not e["size"] for e in found)
    at = ", ".join(format_size(s) for s in sizes) + (" and peak" if peak else "") if sizes else "peak"
    sources = len({e["source"]["url"] for e in found})
    return (f"published for {p['gpus_per_host']} x {p['gpu']} {p['form']} ({p['intra']}), "
            f"{'one host' if p['hosts'] == 1 else str(p['hosts']) + ' hosts'}, {collective}: {span} GB/s "
            f"at {at} ({sources} source{'s' if sources > 1 else ''})")


def source_text(e: Entry) -> str:
    """'460 GB/s threshold at 16 GiB: Azure NHC, ND96isr H100 v5 (URL, 2023-05-06)'."""
    at = f" at {format_size(e['size'])}" if e["size"] else " (peak)"
    alg = f" {e['algorithm']}" if e["algorithm"] else ""
    return (f"{e['busbw_GBps']:g} GB/s {e['kind']}{alg}{at}: {e['source']['name']} "
            f"({e['source']['url']}, {e['source']['date']})")


def lines(found: Sequence[Entry], plat: Dict[str, Any], collective: str, measured: Optional[float] = None,
          at: Optional[int] = None) -> List[str]:
    """The range and one line per source, with the measured figure (GB/s at size `at`) beside."""
    head = range_text(found, plat, collective)
    if found and measured is not None:
        head += f"; measured {measured:.3g} GB/s" + (f" at {format_size(at)}" if at else "")
    return [head] + [f"  {source_text(e)}" for e in found]


def floor(found: Sequence[Entry]) -> Optional[Dict[str, Any]]:
    """check's floor from the matching figures: the lowest, naming its source (None: none)."""
    if not found:
        return None
    low = min(found, key=lambda e: e["busbw_GBps"])
    return {"min_busbw_GBps": float(low["busbw_GBps"]),
            "source": f"published: {low['source']['name']}, {low['source']['url']}"}


def section(per_host: Dict[str, Dict[str, Any]], collectives: Sequence[str],
            entries: Optional[Sequence[Entry]] = None) -> Dict[str, Any]:
    """The document's `published`: the platform the hosts' path facts describe (every host's GPU
    model, its GPU count when all hosts have the same) and the matching entries per collective."""
    counts = {len(p["gpus"]) for p in per_host.values()}
    plat = platform([g["name"] for p in per_host.values() for g in p["gpus"]],
                    counts.pop() if len(counts) == 1 else 0, len(per_host))
    found = load() if entries is None else entries
    return {"platform": plat, "collectives": {c: match(found, plat, c) for c in collectives}}

"""Every command's preamble lines on where it ran: each rank's device (as nccl-tests prints
it), the backend and launcher, versions and how hosts differ, the network variables."""
from typing import Any, Dict, Optional, Sequence

from .numbers import counted, plural


def rank_line(r: Dict[str, Any]) -> str:
    """nccl-tests 2.19.6's line for one rank (group 0); the device is the CUDA ordinal, or cpu."""
    device = r["device"].split(":")[-1] if r["device"].startswith("cuda") else r["device"]
    return (f"#  Rank {r['rank']:2d} Group {0:2d} Pid {r['pid']:6d} on {r['hostname']:>10s} "
            f"device {device:>2s} [{r['bus_id'] or '-'}] {r['device_name']}")


def describe(out: Any, records: Sequence[Dict[str, Any]], world: Dict[str, Any], nbackends: int,
             versions: Dict[str, Optional[str]], differences: Sequence[str],
             env: Dict[str, str]) -> None:
    """world: the document's (diagnose/rankfacts.py); versions: rank 0's; differences: lines
    on the versions that differ between hosts; env: the network variables set."""
    out.say("#\n# Using devices", *map(rank_line, records))
    size, hosts = world["size"], len(world["hosts"])
    out.say(f"# {plural(nbackends, 'backend')} {world['backend']}, launcher "
            f"{world['launcher']}, {counted(size, 'rank')} on {counted(hosts, 'host')}, rendezvous "
            f"{world['rendezvous'] or 'none (no torch process group)'}; timing barrier {world['barrier']}")
    out.say("# versions: " + ", ".join(f"{k} {versions[k]}" for k in versions if versions[k]))
    out.say(*("# " + line for line in differences))
    out.say("# env: " + (" ".join(f"{k}={v}" for k, v in env.items()) if env
                         else "no NCCL_/GLOO_/UCX_/OMPI_MCA_ variables set"))

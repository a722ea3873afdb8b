"""Every command's preamble lines on where it ran: each rank's device (as nccl-tests prints
it), the backend and launcher, versions and how hosts differ, the network variables."""
from typing import Any, Callable, Dict, List, Sequence, Tuple

from tabulate import tabulate

from .numbers import counted, plural


def rank_line(r: Dict[str, Any]) -> str:
    """nccl-tests 2.19.6's line for one rank (group 0); the device is the CUDA ordinal, or cpu."""
    device = r["device"].split(":")[-1] if r["device"].startswith("cuda") else r["device"]
    return (f"#  Rank {r['rank']:2d} Group {0:2d} Pid {r['pid']:6d} on {r['hostname']:>10s} "
            f"device {device:>2s} [{r['bus_id'] or '-'}] {r['device_name']}")


def version_differences(per_host: Dict[str, Dict[str, Any]]) -> List[str]:
    """per_host: {host: versions}, the first host the reference: a warning line per host that differs."""
    ref_host, ref = next(iter(per_host.items()), (None, {}))
    return [f"WARNING: host {host} differs from {ref_host} (rank 0): " + "; ".join(diffs)
            for host, mine in per_host.items()
            for diffs in [[f"{k} {mine.get(k)} vs {ref.get(k)}" for k in ref if mine.get(k) != ref.get(k)]]
            if diffs]


def describe(out: Any, records: Sequence[Dict[str, Any]], world: Dict[str, Any], nbackends: int,
             per_host: Dict[str, Dict[str, Any]], env: Dict[str, str]) -> None:
    """world: the document's (diagnose/rankfacts.py); per_host: each host's versions, rank 0's
    first; env: the network variables set."""
    versions = next(iter(per_host.values()))
    differences = version_differences(per_host)
    out.say("#\n# Using devices", *map(rank_line, records))
    size, hosts = world["size"], len(world["hosts"])
    out.say(f"# {plural(nbackends, 'backend')} {world['backend']}, launcher "
            f"{world['launcher']}, {counted(size, 'rank')} on {counted(hosts, 'host')}, rendezvous "
            f"{world['rendezvous'] or 'none (no torch process group)'}; timing barrier {world['barrier']}")
    out.say("# versions: " + ", ".join(f"{k} {versions[k]}" for k in versions if versions[k]))
    out.say(*("# " + line for line in differences))
    out.say("# env: " + (" ".join(f"{k}={v}" for k, v in env.items()) if env
                         else "no NCCL_/GLOO_/UCX_/OMPI_MCA_ variables set"))


def info(say: Callable[[str], None], world: Dict[str, Any],
         gathered: Sequence[Tuple[Dict[str, Any], Dict[str, Any]]]) -> None:
    """mpibench info: a row per rank (its record, backend and launcher, and its versions), then
    the versions per host and how hosts differ."""
    say(f"# mpibench info: {counted(world['size'], 'rank')} on {counted(len(world['hosts']), 'host')}, "
        f"backend {world['backend']}, launcher {world['launcher']}, rendezvous {world['rendezvous']}")
    devices = [r["device"] if r["device"] == "cpu" else f"{r['device']} {r['device_name']} [{r['bus_id']}]"
               for r, _ in gathered]
    say(tabulate([[r["rank"], r["hostname"], r["pid"], r["local_rank"], device, r["backend"], r["launcher"]]
                  for (r, _), device in zip(gathered, devices)],
                 headers=["rank", "host", "pid", "local rank", "device", "backend", "launcher"]))
    per_host: Dict[str, Dict[str, Any]] = {}
    for r, v in gathered:
        per_host.setdefault(r["hostname"], v)
    say("")
    keys = ["python", "torch", "nccl", "mpi4py", "mpi"]
    say(tabulate([[h] + [v.get(k) or "-" for k in keys] for h, v in per_host.items()],
                 headers=["host"] + keys))
    for line in version_differences(per_host):
        say(line)

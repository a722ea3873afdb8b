"""What NCCL_DEBUG=INFO logs say about the transports NCCL really used. NCCL prints one
line per channel connection when a communicator connects, e.g.

    h1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    h1:4011:4090 [0] NCCL INFO Channel 01/0 : 2[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
    h1:4011:4090 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    h1:4011:4090 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA

A net plugin's name may hold a space ('via NET/AWS Libfabric/0/GDRDMA', aws-ofi-nccl): the
transport runs to the end of the line.

NVLink SHARP shows as 'NVLS comm 0x... headRank ...' (its buffers) or 'Connected NVLS tree',
CollNet as 'CollNet 00/0 : 0 [send] via COLLNET/...'. Whether that means used depends on when
NCCL connects them (init.cc, comm->runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT): from
NCCL 2.22 with runtime connect, at an algorithm's first use (enqueue.cc, algoConnect), so the
lines say it ran; before 2.22, with NCCL_RUNTIME_CONNECT=0 or without cuMem
(NCCL_CUMEM_ENABLE=0), at init for every communicator that supports them, so they say only
that it was set up. The summary line 'N coll channels, N collnet channels, N nvls channels,
...' shows neither: its nvls count says NVLS is supported, and its collnet count has been the
coll channel count since NCCL 2.21 (init.cc prints comm->nChannels twice).
"""
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

_CHANNEL = re.compile(
    r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-F]+\])? -> (\d+)"
    r"(?:\[[0-9a-fA-F]+\])?(?: \[(send|receive)\])? via (.+?)\s*$")
# runtime connect off by the environment (param.cc: "%s set by environment to %lld.")
_CONNECT_OFF = re.compile(r"NCCL INFO NCCL_(?:RUNTIME_CONNECT|CUMEM_ENABLE) set by environment to 0\b")
RUNTIME_CONNECT = (2, 22)       # the first NCCL that connects NVLS and CollNet at first use
SET_UP = " (set up)"            # NVLS or CollNet connected at init: not known to have run
_COLLNET = re.compile(r"NCCL INFO (?:CollNet|Coll) \d+(?:/\d+)? : (\d+) \[(send|receive)\] via COLLNET/")
_NVLS_USED = re.compile(r"NCCL INFO (?:Connected NVLS|NVLS comm \S+ headRank )")
_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_PREFIX = re.compile(r"^(?:\[[^\]]*\](?:<\w+>:)?\s*)?([^\s:]+):\d+:\d+ \[\d+\] NCCL")   # mpirun --tag-output


def transport_name(via: str) -> str:
    """'NET/IB/0/GDRDMA' -> 'NET/IB'; 'P2P/CUMEM/read' -> 'P2P/CUMEM'; 'SHM/direct/direct' -> 'SHM'."""
    head, *rest = via.split("/")
    if head == "NET" and rest:      # IB, IBext, IBext_v8: the IB plugin; "AWS Libfabric"
        return "NET/IB" if rest[0].startswith("IB") else f"NET/{rest[0].strip()}"
    if head in ("P2P", "PSM_P2P") and rest:
        return f"P2P/{rest[0].split(' ')[0]}"     # "direct pointer" -> "direct"
    return head                            # SHM, COLLNET, ...


def parse_line(line: str) -> Optional[Tuple[int, int, str]]:
    """(src rank, dst rank, transport) for a channel connection line, else None."""
    m = _CHANNEL.search(line)
    return (int(m.group(1)), int(m.group(2)), transport_name(m.group(4))) if m else None


def parse(text: str) -> Dict[str, Any]:
    """Everything a log says: connections, NVLS/CollNet use, version, network, hosts."""
    out: Dict[str, Any] = {"connections": set(), "nvls": False, "nvls_hosts": set(), "collnet": False,
           "version": None, "network": None, "hosts": set(), "connect_off": False}
    for line in text.splitlines():
        if "NCCL" not in line:
            continue
        if p := _PREFIX.search(line):
            out["hosts"].add(p.group(1))
        if conn := parse_line(line):
            out["connections"].add(conn)
        elif _COLLNET.search(line):
            out["collnet"] = True
        elif _NVLS_USED.search(line):
            out["nvls"] = True
            if p:
                out["nvls_hosts"].add(p.group(1))
        elif _CONNECT_OFF.search(line):
            out["connect_off"] = True
        elif m := _VERSION.search(line):
            out["version"] = m.group(1)
        elif m := _NETWORK.search(line):
            out["network"] = m.group(1)
    return out


def connects_at_use(p: Mapping[str, Any]) -> bool:
    """Whether the log's NCCL connects NVLS and CollNet at their first use (2.22 on, runtime
    connect and cuMem not turned off); False where the log does not say its version."""
    version = tuple(int(x) for x in re.findall(r"\d+", p["version"] or "")[:2])
    return len(version) == 2 and version >= RUNTIME_CONNECT and not p["connect_off"]


def by_host_pair(parsed: Sequence[Mapping[str, Any]], hosts: Sequence[str]
                 ) -> Dict[Tuple[str, str], List[str]]:
    """{(host a, host b): sorted transports} ((h, h): its own GPUs'), hosts[r] rank r's. NVLS
    joins the hosts whose ranks logged it (each pair inside a host when no line names its
    host), CollNet each pair between hosts; both marked SET_UP where NCCL connects them at
    init."""
    order = {h: i for i, h in enumerate(dict.fromkeys(hosts))}
    pairs = _connection_pairs(parsed, hosts, order)
    _add_nvls_collnet(parsed, order, pairs)
    return {k: sorted(v) for k, v in sorted(pairs.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]]))}


def _connection_pairs(parsed: Sequence[Mapping[str, Any]], hosts: Sequence[str], order: Mapping[str, int]
                      ) -> Dict[Tuple[str, str], Set[str]]:
    """{(host a, host b): transports} of the logged channel connections, a before b in hosts."""
    pairs: Dict[Tuple[str, str], Set[str]] = {}
    for p in parsed:
        for src, dst, transport in p["connections"]:
            if src >= len(hosts) or dst >= len(hosts):
                continue
            a, b = sorted((hosts[src], hosts[dst]), key=lambda h: order[h])
            pairs.setdefault((a, b), set()).add(transport)
    return pairs


def _add_nvls_collnet(parsed: Sequence[Mapping[str, Any]], order: Mapping[str, int],
                      pairs: Dict[Tuple[str, str], Set[str]]) -> None:
    """NVLS added to the pairs inside its hosts, CollNet to those between hosts (SET_UP where at init)."""
    nvls, collnet = (any(p[k] for p in parsed) for k in ("nvls", "collnet"))
    used = all(connects_at_use(p) for p in parsed if p["nvls"] or p["collnet"])
    nvls_hosts = {h for p in parsed for h in p["nvls_hosts"] if h in order}
    for h in nvls_hosts:
        pairs.setdefault((h, h), set())
    _mark(pairs, nvls, collnet, nvls_hosts, "" if used else SET_UP)


def _mark(pairs: Dict[Tuple[str, str], Set[str]], nvls: bool, collnet: bool, nvls_hosts: Set[str],
          mark: str) -> None:
    """NVLS added to each pair inside an NVLS host (any host where none is named), CollNet between hosts."""
    for (a, b), found in pairs.items():
        if nvls and a == b and (a in nvls_hosts or not nvls_hosts):
            found.add("NVLS" + mark)
        if collnet and a != b:
            found.add("CollNet" + mark)

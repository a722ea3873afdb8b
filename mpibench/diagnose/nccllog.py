"""What NCCL_DEBUG=INFO logs say about the transports NCCL really used. NCCL prints one
line per channel connection when a communicator connects, e.g.

    h1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    h1:4011:4090 [0] NCCL INFO Channel 01/0 : 2[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
    h1:4011:4090 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    h1:4011:4090 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA

NVLink SHARP in use shows as 'NVLS comm 0x... headRank ...' (its buffers, set up when
NVLS runs) or 'Connected NVLS tree'. The summary line 'N coll channels, N collnet channels,
N nvls channels, ...' shows neither: its nvls count says NVLS is supported, and its collnet
count has been the coll channel count since NCCL 2.21 (init.cc prints comm->nChannels twice).
"""
import re

_CHANNEL = re.compile(
    r"NCCL INFO (?:Channel|Ring) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-F]+\])? -> (\d+)"
    r"(?:\[[0-9a-fA-F]+\])?(?: \[(send|receive)\])? via (\S+(?: pointer)?)")
_COLLNET = re.compile(r"NCCL INFO (?:CollNet|Coll) \d+(?:/\d+)? : (\d+) \[(send|receive)\] via COLLNET/")
_NVLS_USED = re.compile(r"NCCL INFO (?:Connected NVLS|NVLS comm \S+ headRank )")
_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_PREFIX = re.compile(r"^(?:\[[^\]]*\](?:<\w+>:)?\s*)?([^\s:]+):\d+:\d+ \[\d+\] NCCL")   # mpirun --tag-output


def transport_name(via):
    """'NET/IB/0/GDRDMA' -> 'NET/IB'; 'P2P/CUMEM/read' -> 'P2P/CUMEM'; 'SHM/direct/direct' -> 'SHM'."""
    head, *rest = via.split("/")
    if head == "NET" and rest:      # IB, IBext, IBext_v8: the IB plugin
        return "NET/IB" if rest[0].startswith("IB") else f"NET/{rest[0]}"
    if head in ("P2P", "PSM_P2P") and rest:
        return f"P2P/{rest[0].split(' ')[0]}"     # "direct pointer" -> "direct"
    return head                            # SHM, COLLNET, ...


def parse_line(line):
    """(src rank, dst rank, transport) for a channel connection line, else None."""
    m = _CHANNEL.search(line)
    return (int(m.group(1)), int(m.group(2)), transport_name(m.group(4))) if m else None


def parse(text):
    """Everything a log says: connections, NVLS/CollNet use, version, network, hosts."""
    out = {"connections": set(), "nvls": False, "collnet": False, "version": None,
           "network": None, "hosts": set()}
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
        elif m := _VERSION.search(line):
            out["version"] = m.group(1)
        elif m := _NETWORK.search(line):
            out["network"] = m.group(1)
    return out


def by_host_pair(parsed, hosts):
    """{(host a, host b): sorted transports} ((h, h): its own GPUs'), hosts[r] rank r's. NVLS
    and CollNet, used across the communicator, join each pair they can serve."""
    order = {h: i for i, h in enumerate(dict.fromkeys(hosts))}
    pairs = {}
    nvls, collnet = (any(p[k] for p in parsed) for k in ("nvls", "collnet"))
    for p in parsed:
        for src, dst, transport in p["connections"]:
            if src >= len(hosts) or dst >= len(hosts):
                continue
            a, b = sorted((hosts[src], hosts[dst]), key=order.get)
            pairs.setdefault((a, b), set()).add(transport)
    for (a, b), found in pairs.items():
        if nvls and a == b:
            found.add("NVLS")
        if collnet and a != b:
            found.add("CollNet")
    return {k: sorted(v) for k, v in sorted(pairs.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]]))}

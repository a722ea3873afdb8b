"""Which address of this host the other hosts can reach (for the rendezvous store)."""
import fcntl
import socket
import struct
from typing import Dict, List, Mapping, Sequence

_SIOCGIFADDR = 0x8915


def interface_addresses() -> Dict[str, str]:
    """{interface: IPv4 address} for every interface that has one."""
    out: Dict[str, str] = {}
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return out
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            out[name] = socket.inet_ntoa(packed[20:24])
    return out


def match_ifname(spec: str, names: Sequence[str]) -> List[str]:
    """Interfaces chosen by an NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME value, in NCCL's
    syntax: comma-separated prefixes; '^' excludes them; '=' asks for exact names."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec[exclude:]
    exact = spec.startswith("=")
    items = [item for item in spec[exact:].split(",") if item]
    return [name for name in names
            if any(name == item if exact else name.startswith(item) for item in items) != exclude]


def reachable_address(env: Mapping[str, str], peers: Sequence[str]) -> str:
    """This host's address for the other hosts (peers: theirs), honouring *_SOCKET_IFNAME in env."""
    if not peers:
        return "127.0.0.1"
    addrs = interface_addresses()
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if spec := env.get(var):
            chosen = [n for n in match_ifname(spec, sorted(addrs)) if not addrs[n].startswith("127.")]
            if not chosen:
                raise RuntimeError(f"{var}={spec} matches no interface with an IPv4 address "
                                   f"on this host (it has: {', '.join(sorted(addrs)) or 'none'})")
            return addrs[chosen[0]]
    # The source address the kernel would use to reach a peer is reachable from it.
    for peer in peers:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((peer, 9))   # UDP connect sends nothing
                addr: str = s.getsockname()[0]
            if not addr.startswith("127."):
                return addr
        except OSError:
            continue
    for addr in addrs.values():
        if not addr.startswith("127."):
            return addr
    raise RuntimeError("no non-loopback IPv4 address on this host for the other hosts to reach; "
                       "set MASTER_ADDR, or NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME")

"""Rails on CPUs: check --rails eth0,eth1 (or MPIBENCH_RAILS, for any command) binds local
rank i to interface i, as GPU i uses NIC i on a rail-optimised node, through the
GLOO_SOCKET_IFNAME that gloo and the rendezvous address (netaddr) follow."""
import os
from typing import List, MutableMapping, Optional, Tuple

from . import netaddr

VAR = "MPIBENCH_RAILS"


def parse(spec: Optional[str]) -> Optional[List[str]]:
    """'eth0,eth1' -> ['eth0', 'eth1'] (None for unset or empty); ValueError on a repeated or empty name."""
    if not spec or not spec.strip():
        return None
    names = [x.strip() for x in spec.split(",")]
    if any(not x for x in names):
        raise ValueError(f"{VAR}={spec}: an empty interface name")
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise ValueError(f"{VAR}={spec}: {', '.join(twice)} named twice (one interface per rail)")
    return names


def bind(local_rank: int, local_size: int, env: MutableMapping[str, str], hostname: str,
         spec: Optional[str] = None) -> Tuple[Optional[Tuple[int, str]], Optional[str]]:
    """Point this rank at its rail (spec: check's --rails, else env's VAR): (rail index,
    interface) or None without rails, and an error text (or None) for Session.agree."""
    try:
        names = parse(spec or env.get(VAR))
    except ValueError as exc:
        return None, str(exc)
    if names is None:
        return None, None
    if len(names) != local_size:
        return None, (f"{VAR} names {len(names)} rail{'s' if len(names) != 1 else ''} "
                      f"({','.join(names)}) for {local_size} rank{'s' if local_size != 1 else ''} "
                      f"on host {hostname}: give one interface per local rank")
    have = netaddr.interface_addresses()
    mine = names[local_rank]
    if mine not in have:
        usable = sorted(n for n, a in have.items() if not a.startswith("127."))
        return None, (f"{VAR}: rail {local_rank} is {mine}, which host {hostname} does not "
                      f"have with an IPv4 address (it has {', '.join(usable) or 'none'}): "
                      f"more rails than interfaces")
    os.environ["GLOO_SOCKET_IFNAME"] = env["GLOO_SOCKET_IFNAME"] = mine
    return (local_rank, mine), None

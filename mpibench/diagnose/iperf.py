"""iperf3 between the hosts of a job, started by the ranks themselves: the TCP rate each link
gives. One rank per host, pairs in pairs.schedule's rounds; the lower rank serves (`-s -1`:
one test), the higher connects, both bound to the benchmark's own address; every rank joins
every round's barrier and gather."""
import json
import shutil
import socket
import subprocess
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from ..launch.netaddr import reachable_address
from . import pairs

if TYPE_CHECKING:
    from ..launch.session import Session

PORT = 5201
CONNECT_TRIES = 25          # the server may not listen yet when the client starts
CONNECT_PAUSE = 0.2


def address(session: "Session", env: Mapping[str, str]) -> str:
    """This host's address on the benchmark's interface: towards the rendezvous host, or the others."""
    master = env.get("MASTER_ADDR") or (session.rendezvous or "").rsplit(":", 1)[0]
    peers = [master] if master else []
    assert session.hosts is not None
    for host in dict.fromkeys(session.hosts):
        if host != session.hostname:
            with suppress(OSError):
                peers.append(socket.gethostbyname(host))
    addr: str = reachable_address(env, peers)
    return addr


def serve(bind: str, port: int) -> "subprocess.Popen[str]":
    """Start a one-test server bound to bind (a Popen; finish() collects it)."""
    return subprocess.Popen(["iperf3", "-s", "-1", "-J", "-B", bind, "-p", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def connect(server: str, bind: str, port: int, seconds: float
            ) -> Tuple[Optional[float], Optional[int], Optional[str]]:
    """Run the client; (bits per second, retransmits, None) or (None, None, why)."""
    argv = ["iperf3", "-c", server, "-B", bind, "-p", str(port), "-t", f"{seconds:g}", "-J"]
    for _ in range(CONNECT_TRIES):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            return None, None, f"iperf3 -c {server} did not finish within {seconds + 30:g} s"
        try:        # the rate the receiver saw in iperf3 -J's output
            report = json.loads(done.stdout)
            end = report.get("end") or {}
            if received := (end.get("sum_received") or {}).get("bits_per_second"):
                return float(received), (end.get("sum_sent") or {}).get("retransmits"), None
            why = report.get("error") or "no sum_received in iperf3's JSON"
        except ValueError as exc:        # json.JSONDecodeError is one
            why = str(exc) or done.stderr.strip()
        if "connect" not in why:
            break
        time.sleep(CONNECT_PAUSE)
    return None, None, f"iperf3 -c {server} -B {bind}: {why}"


def finish(server: "subprocess.Popen[str]", seconds: float) -> None:
    """Collect a server started by serve() (killed when it outlives the test)."""
    try:
        server.communicate(timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.communicate()


def _client(hosts: List[str], known: List[Any], a: int, b: int, ready: bool, port: int,
            seconds: float) -> Dict[str, Any]:
    """The client's record of its pair: iperf3 to rank a's server, or why not."""
    if ready:
        bps, retr, why = connect(known[a][0], known[b][0], port, seconds)
    else:
        missing = [hosts[r] for r in (a, b) if not known[r][1]]
        bps, retr, why = None, None, f"iperf3 is not installed on {', '.join(missing)}"
    return {"hosts": [hosts[a], hosts[b]], "server": hosts[a], "client": hosts[b],
            "addresses": [known[a][0], known[b][0]], "bits_per_second": bps, "retransmits": retr,
            "error": why}


def run_pairs(session: "Session", env: Mapping[str, str], seconds: float,
              port: int = PORT) -> Optional[List[Dict[str, Any]]]:
    """Every pair of hosts once, on every rank: rank 0 gets a record per pair, others None."""
    assert session.hosts is not None
    ranks = pairs.participants(session.hosts)
    mine = (address(session, env), shutil.which("iperf3") is not None) \
        if session.rank in ranks and len(ranks) > 1 else None
    known: List[Any] = session.comm.allgather(mine)     # None where a rank is in no pair
    results: List[Optional[Dict[str, Any]]] = []
    for rnd in pairs.schedule(ranks, session.hosts):
        pair: Tuple[Any, Any] = next(((a, b) for a, b in rnd if session.rank in (a, b)), (None, None))
        a, b = pair
        record = server = None
        ready = a is not None and known[a][1] and known[b][1]
        if ready and session.rank == a:
            server = serve(known[a][0], port)
        session.comm.barrier()
        if b is not None and session.rank == b:
            record = _client(session.hosts, known, a, b, bool(ready), port, seconds)
        if server is not None:
            finish(server, seconds)
        results += session.comm.gather(record, root=0) or []      # None off rank 0
    return [g for g in results if g is not None] if session.rank == 0 else None

#!/usr/bin/env python3
"""Several hosts on one Linux machine, for multi-host tests (root only, stdlib only).

Each host is a network namespace with its own hostname (UTS namespace) and a
hosts file bind-mounted on /etc/hosts (private mount namespace).  All hosts hang
off a bridge that lives in its own "switch" namespace, so the root namespace
gets no interfaces or routes and two clusters with the same addresses can exist
at the same time.  Optional tc tbf rate limits per host link, both directions.

Rails: with rails=2 each host has eth0 on one bridge and eth1 on another, each rail its
own subnet (198.51.100.0/25 and .128/25; /26s for 3 or 4 rails).  Leaves: hosts grouped
under leaf bridges (one set per rail), joined to a spine bridge by an uplink veth pair
each, whose rate can be limited too.  Rates per host ("h3"), per host interface
("h3:eth1") or per leaf uplink (uplink_rates={"leaf2": "250mbit"}).

    with FakeCluster(hosts=3, rates={"h3": "250mbit"}) as c:
        c.run_on("h2", ["hostname"])
        c.mpirun(["python", "script.py"], ppn=2)
    with FakeCluster(hosts=4, rails=2, rates={"*": "1gbit", "h3:eth1": "250mbit"}) as c: ...
    with FakeCluster(hosts=8, leaves={"leaf1": ["h1", "h2", "h3", "h4"],
                                      "leaf2": ["h5", "h6", "h7", "h8"]},
                     uplink_rates={"leaf2": "250mbit"}) as c:
        c.topology_conf()    # the same layout in SLURM's topology.conf syntax

Script use:
    python launch/fakecluster.py --hosts 3 --ppn 2 --rate 1gbit -- python -m mpibench ...
    python launch/fakecluster.py --hosts 4 --ppn 2 --rails 2 --rate 1gbit --rate h3:eth1=250mbit \
        -- python -m mpibench check --rails eth0,eth1
    python launch/fakecluster.py --hosts 8 --leaves 2 --uplink-rate leaf2=250mbit \
        --rate 1gbit --topology-out topo.conf -- python -m mpibench check --topology topo.conf
    python launch/fakecluster.py --hosts 2 --exec -- hostname
    python launch/fakecluster.py --cleanup     # remove leftovers of killed runs
"""
from __future__ import annotations

import argparse
import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SUBNET = "198.51.100"  # TEST-NET-2; this machine's eth0 sits in 192.0.2.x
PREFIX = "fc"  # namespace names: fc<pid>x<tag>-<host>
NETNS_DIR = Path("/run/netns")
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)([kmgt]?)(bit|bps)$", re.I)
_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}

# Runs inside the new UTS+mount namespaces: set the hostname, bind the hosts
# file, then exec the command.  Fixed text; host, file and argv are positional
# parameters, never spliced into the script.
_ENTER = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'

# prte's ssh launcher calls `agent [opts] HOST CMD...`, where CMD is meant for a
# remote shell (ssh joins the words).  We enter the host and hand CMD to sh.
_AGENT = """#!/bin/sh
# rsh/ssh agent for mpirun (prte): start remote daemons inside fake hosts.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "fakecluster agent: unknown host '$host'" >&2; exit 255 ;;
esac
exec nsenter --net="$ns" -- unshare --uts --mount --propagation private -- \\
  /bin/sh -c '{enter}' fc-enter "$host" {hosts_file} /bin/sh -c "$*"
"""

_live: set["FakeCluster"] = set()
_live_lock = threading.Lock()


def rate_bits(rate: str) -> float:
    """'250mbit' -> 2.5e8 bits/s (tc units: bit = bits/s, bps = bytes/s)."""
    m = _RATE_RE.match(rate.strip())
    if not m:
        raise ValueError(f"bad rate {rate!r}; use e.g. 1gbit, 250mbit, 100mbps")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    return value * 8 if m.group(3).lower() == "bps" else value


def missing_tools() -> list[str]:
    """Names of required tools that are missing (empty list: all there)."""
    return [t for t in ("ip", "tc", "nsenter", "unshare", "mount", "hostname")
            if shutil.which(t) is None]


def _sh(argv: list[str], timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)


def _kill_netns_pids(ns: str, grace: float = 2.0) -> None:
    """TERM then KILL every process whose network namespace is `ns`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        r = _sh(["ip", "netns", "pids", ns], check=False)
        pids = [int(p) for p in r.stdout.split() if p.isdigit() and int(p) != os.getpid()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            r = _sh(["ip", "netns", "pids", ns], check=False)
            if not r.stdout.split():
                return
            time.sleep(0.05)


def cleanup_stale() -> list[str]:
    """Delete namespaces left by fake clusters whose creating process is dead."""
    removed = []
    if not NETNS_DIR.is_dir():
        return removed
    names = sorted(p.name for p in NETNS_DIR.iterdir())
    for name in names:
        m = re.match(rf"^{PREFIX}(\d+)x[0-9a-f]+-", name)
        if not m:
            continue
        if Path(f"/proc/{m.group(1)}").exists():
            continue  # owner alive (or pid reused): leave it
        _kill_netns_pids(name)
        _sh(["ip", "netns", "del", name], check=False)
        removed.append(name)
    return removed


def _teardown_all_on_signal(signum, frame):
    with _live_lock:
        clusters = list(_live)
    for c in clusters:
        c.close()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_signal_handlers() -> None:
    # Only take over signals nobody else handles, and only from the main thread.
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            signal.signal(sig, _teardown_all_on_signal)


class FakeCluster:
    """N fake hosts (network namespaces) behind one switch namespace.

    hosts: number of hosts, or `names` for explicit host names.
    rates: one tc rate for every host link ("1gbit"), or {host: rate}; a "*"
        key in the dict is the default for hosts not named.
    """

    switch_name = "switch"  # hostname of the switch namespace (address .1)

    def __init__(self, hosts: int = 2, names: list[str] | None = None,
                 rates: str | dict[str, str] | None = None, workdir: str | None = None,
                 rails: int = 1, leaves: dict[str, list[str]] | None = None,
                 uplink_rates: str | dict[str, str] | None = None):
        names = list(names) if names else [f"h{i}" for i in range(1, hosts + 1)]
        if not 1 <= rails <= 4:
            raise ValueError("need 1..4 rails")
        block = 256 if rails == 1 else 256 // (2 if rails == 2 else 4)
        limit = min(200, block - 12)
        if not 1 <= len(names) <= limit:
            raise ValueError(f"need 1..{limit} hosts with {rails} rail{'s' if rails > 1 else ''}")
        for n in names + [self.switch_name]:
            if not _NAME_RE.match(n):
                raise ValueError(f"bad host name {n!r}")
        if len(set(names)) != len(names) or self.switch_name in names:
            raise ValueError("host names must be unique and not 'switch'")
        self.hosts = names
        self.rails = rails
        self.ifaces = [f"eth{r}" for r in range(rails)]
        self._block = block
        # rail r: 198.51.100.(block*r + 11 + i); rail 0 keeps the addresses of one rail
        self.rail_addrs = [{h: f"{SUBNET}.{block * r + 11 + i}" for i, h in enumerate(names)}
                           for r in range(rails)]
        self.addrs = self.rail_addrs[0]
        self.switch_addr = f"{SUBNET}.1"
        self.leaves = self._check_leaves(leaves, names)
        if isinstance(rates, str):
            rates = {"*": rates}
        rates = dict(rates or {})
        ports = {f"{h}:{i}" for h in names for i in self.ifaces}
        unknown = set(rates) - set(names) - ports - {"*"}
        if unknown:
            raise ValueError(f"rates for unknown hosts or interfaces: {sorted(unknown)}")
        default = rates.pop("*", None)
        self.rates = {h: rates.get(h, default) for h in names if rates.get(h, default)}
        # per (host, interface): its own rate, else the host's, else the default
        self.port_rates = {(h, i): rates.get(f"{h}:{i}", rates.get(h, default))
                           for h in names for i in self.ifaces
                           if rates.get(f"{h}:{i}", rates.get(h, default))}
        if isinstance(uplink_rates, str):
            uplink_rates = {leaf: uplink_rates for leaf in self.leaves}
        self.uplink_rates = dict(uplink_rates or {})
        if self.uplink_rates and not self.leaves:
            raise ValueError("uplink rates need leaves")
        bad = set(self.uplink_rates) - set(self.leaves)
        if bad:
            raise ValueError(f"uplink rates for unknown leaves: {sorted(bad)}")
        for r in list(self.port_rates.values()) + list(self.uplink_rates.values()):
            rate_bits(r)  # validate early
        self.tag = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        self._workdir_arg = workdir
        self.workdir: Path | None = None
        self._procs: list[subprocess.Popen] = []
        self._made: list[str] = []  # namespaces created so far
        self._closed = True
        self.timings: dict[str, float] = {}

    @staticmethod
    def _check_leaves(leaves, names):
        if not leaves:
            return {}
        seen = {}
        for leaf, hs in leaves.items():
            if not _NAME_RE.match(leaf) or leaf == "spine1":
                raise ValueError(f"bad leaf name {leaf!r}")
            for h in hs:
                if h not in names:
                    raise ValueError(f"leaf {leaf}: unknown host {h!r}")
                if h in seen:
                    raise ValueError(f"host {h} under two leaves ({seen[h]}, {leaf})")
                seen[h] = leaf
        left = [h for h in names if h not in seen]
        if left:
            raise ValueError(f"hosts under no leaf: {left}")
        if len(leaves) > 9:
            raise ValueError("at most 9 leaves")
        return {leaf: list(hs) for leaf, hs in leaves.items()}

    def topology_conf(self) -> str:
        """The layout in SLURM's topology.conf syntax (one switch when there are no leaves)."""
        if not self.leaves:
            return f"SwitchName=switch1 Nodes={','.join(self.hosts)}\n"
        lines = [f"SwitchName={leaf} Nodes={','.join(hs)}" for leaf, hs in self.leaves.items()]
        lines.append(f"SwitchName=spine1 Switches={','.join(self.leaves)}")
        return "\n".join(lines) + "\n"

    # ---- names -------------------------------------------------------------
    def netns(self, host: str) -> str:
        """Namespace name of a host (or of the switch)."""
        if host != self.switch_name and host not in self.addrs:
            raise KeyError(f"unknown host {host!r}")
        return f"{self.tag}-{'sw' if host == self.switch_name else host}"

    def addr(self, host: str) -> str:
        return self.switch_addr if host == self.switch_name else self.addrs[host]

    @property
    def hosts_file(self) -> Path:
        return self.workdir / "hosts"

    @property
    def agent(self) -> Path:
        return self.workdir / "rsh-agent"

    # ---- build / teardown --------------------------------------------------
    def __enter__(self) -> "FakeCluster":
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def up(self) -> "FakeCluster":
        if os.geteuid() != 0:
            raise PermissionError("FakeCluster needs root (network namespaces)")
        miss = missing_tools()
        if miss:
            raise FileNotFoundError(f"missing tools: {', '.join(miss)}")
        t0 = time.monotonic()
        self._closed = False
        with _live_lock:
            _live.add(self)
        atexit.register(self.close)
        _install_signal_handlers()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        self.timings["up_s"] = time.monotonic() - t0
        return self

    def _build(self) -> None:
        if self._workdir_arg:
            self.workdir = Path(self._workdir_arg)
            self.workdir.mkdir(parents=True, exist_ok=True)
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                 f"{self.switch_addr} {self.switch_name}"]
        lines += [f"{self.addrs[h]} {h}" for h in self.hosts]
        # Reverse lookups of IPv4-mapped peers (torch's c10d store asks for
        # them) otherwise go to DNS and warn "cannot be retrieved".
        lines += [f"::ffff:{self.addrs[h]} {h}" for h in self.hosts]
        self.hosts_file.write_text("\n".join(lines) + "\n")
        cases = "\n".join(f"  {h}) ns={NETNS_DIR / self.netns(h)} ;;" for h in self.hosts)
        self.agent.write_text(_AGENT.format(cases=cases, enter=_ENTER,
                                            hosts_file=self.hosts_file))
        self.agent.chmod(0o755)

        sw = self.netns(self.switch_name)
        self._add_netns(sw)
        ipsw = ["ip", "-n", sw]
        _sh(ipsw + ["link", "set", "lo", "up"])
        plen = 24 if self.rails == 1 else 32 - (self._block.bit_length() - 1)
        leaf_of = {h: leaf for leaf, hs in self.leaves.items() for h in hs}
        leaf_index = {leaf: k for k, leaf in enumerate(self.leaves)}
        for r in range(self.rails):
            # rail 0 with no leaves keeps the one bridge's name, br0
            top = "br0" if r == 0 and not self.leaves else (f"sp{r}" if self.leaves else f"br{r}")
            _sh(ipsw + ["link", "add", top, "type", "bridge"])
            if r == 0:
                _sh(ipsw + ["addr", "add", f"{self.switch_addr}/{plen}", "dev", top])
            _sh(ipsw + ["link", "set", top, "up"])
            for leaf, k in leaf_index.items():
                br, up, down = f"lf{r}x{k}", f"up{r}x{k}", f"dn{r}x{k}"
                _sh(ipsw + ["link", "add", br, "type", "bridge"])
                _sh(ipsw + ["link", "set", br, "up"])
                _sh(ipsw + ["link", "add", up, "type", "veth", "peer", "name", down])
                _sh(ipsw + ["link", "set", up, "master", br, "up"])
                _sh(ipsw + ["link", "set", down, "master", top, "up"])
                if leaf in self.uplink_rates:
                    self._shape(sw, up, self.uplink_rates[leaf])    # leaf -> spine
                    self._shape(sw, down, self.uplink_rates[leaf])  # spine -> leaf
        for i, h in enumerate(self.hosts):
            ns = self.netns(h)
            self._add_netns(ns)
            ipn = ["ip", "-n", ns]
            _sh(ipn + ["link", "set", "lo", "up"])
            if self.rails > 1:
                # a reply may leave by the other rail than the request came in on
                for key in ("all", "default"):
                    _sh(["nsenter", f"--net={NETNS_DIR / ns}", "sysctl", "-qw",
                         f"net.ipv4.conf.{key}.rp_filter=0"])
            for r, dev in enumerate(self.ifaces):
                port = f"port{i + 1}" if r == 0 else f"p{r}x{i + 1}"
                if h in leaf_of:
                    br = f"lf{r}x{leaf_index[leaf_of[h]]}"
                else:
                    br = "br0" if r == 0 else f"br{r}"
                # Both ends are created straight inside their namespaces: nothing
                # ever appears in the root namespace.
                _sh(ipsw + ["link", "add", port, "type", "veth", "peer", "name", dev,
                            "netns", ns])
                _sh(ipsw + ["link", "set", port, "master", br, "up"])
                _sh(ipn + ["addr", "add", f"{self.rail_addrs[r][h]}/{plen}", "dev", dev])
                _sh(ipn + ["link", "set", dev, "up"])
                rate = self.port_rates.get((h, dev))
                if rate:
                    self._shape(ns, dev, rate)  # host -> switch
                    self._shape(sw, port, rate)  # switch -> host

    def _add_netns(self, ns: str) -> None:
        _sh(["ip", "netns", "add", ns])
        self._made.append(ns)

    @staticmethod
    def _shape(ns: str, dev: str, rate: str) -> None:
        bps = rate_bits(rate)
        burst = max(16 * 1024, int(bps / 8 * 0.004))  # ~4 ms of traffic
        _sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root",
             "tbf", "rate", rate, "burst", str(burst), "latency", "50ms"])

    def close(self) -> None:
        """Kill every process in the cluster, delete namespaces and files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        t0 = time.monotonic()
        # Polite first: a daemon that gets SIGTERM reaps its own children
        # (slurmctld its slurmscriptd); SIGKILL would orphan them to init.
        live = [p for p in self._procs if p.poll() is None]
        for p in live:
            _killpg(p, signal.SIGTERM)
        deadline = time.monotonic() + 3
        for p in live:
            try:
                p.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _killpg(p)
        # Hosts first, then the switch: deleting a host namespace removes its
        # veth pair, deleting the switch namespace removes the bridge.
        for ns in reversed(self._made):
            _kill_netns_pids(ns)
        for ns in reversed(self._made):
            _sh(["ip", "netns", "del", ns], check=False)
        for p in self._procs:
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        self._made.clear()
        if self.workdir and not self._workdir_arg:
            shutil.rmtree(self.workdir, ignore_errors=True)
        with _live_lock:
            _live.discard(self)
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        self.timings["down_s"] = time.monotonic() - t0

    # ---- running things ----------------------------------------------------
    def enter_argv(self, host: str, argv: list[str]) -> list[str]:
        """argv that runs `argv` inside `host` (netns, own hostname, hosts file)."""
        if self._closed:
            raise RuntimeError("cluster is not up")
        return ["nsenter", f"--net={NETNS_DIR / self.netns(host)}", "--",
                "unshare", "--uts", "--mount", "--propagation", "private", "--",
                "/bin/sh", "-c", _ENTER, "fc-enter", host, str(self.hosts_file),
                *map(str, argv)]

    def popen(self, host: str, argv: list[str], env: dict | None = None,
              **kw) -> subprocess.Popen:
        """Start a long-running process on a host; killed at teardown."""
        p = subprocess.Popen(self.enter_argv(host, argv), env=env,
                             start_new_session=True, **kw)
        self._procs.append(p)
        return p

    def run_on(self, host: str, argv: list[str], env: dict | None = None,
               timeout: float = 60, check: bool = False,
               input: str | None = None) -> subprocess.CompletedProcess:
        """Run a command on one host; stdout/stderr captured as text."""
        p = self.popen(host, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                       text=True)
        try:
            out, err = p.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(p)
            self._kill_strays(host)
            out, err = p.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err)
        finally:
            if p.poll() is not None and p in self._procs:
                self._procs.remove(p)
        res = subprocess.CompletedProcess(argv, p.returncode, out, err)
        if check:
            res.check_returncode()
        return res

    def _kill_strays(self, *hosts: str) -> None:
        for h in hosts or self.hosts:
            _kill_netns_pids(self.netns(h))

    def mpirun_argv(self, argv: list[str], ppn: int | dict[str, int] = 1,
                    mpirun: str | None = None, extra_args: list[str] = ()) -> list[str]:
        """The mpirun command line (as run inside the first host)."""
        mpirun = mpirun or default_mpirun()
        if isinstance(ppn, int):
            ppn = {h: ppn for h in self.hosts}
        unknown = set(ppn) - set(self.hosts)
        if unknown:
            raise ValueError(f"ppn for unknown hosts: {sorted(unknown)}")
        spec = ",".join(f"{h}:{n}" for h, n in ppn.items() if n > 0)
        np_ = sum(ppn.values())
        cmd = [mpirun, "--np", str(np_), "--host", spec]
        if "--map-by" not in extra_args:
            # Fill each host's slots in order.  Plain --oversubscribe makes
            # Open MPI 5 map by core and pile every rank onto the first host.
            cmd += ["--map-by", "slot:OVERSUBSCRIBE"]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        # Open MPI 5 (prte) and 4 (orte) both accept the orte-era name.
        cmd += ["--mca", "plm_rsh_agent", str(self.agent)]
        return cmd + list(extra_args) + [str(a) for a in argv]

    def mpirun(self, argv: list[str], ppn: int | dict[str, int] = 1,
               mpirun: str | None = None, extra_args: list[str] = (),
               env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run `mpirun ... argv` inside the first host; remote daemons start
        through the agent, so they inherit this environment (PATH, venv).

        ppn: ranks per host, or {host: ranks} (hosts left out get none).
        env: the whole environment, as for subprocess (None: inherit)."""
        cmd = self.mpirun_argv(argv, ppn, mpirun, extra_args)
        try:
            return self.run_on(self.hosts[0], cmd, env=env, timeout=timeout)
        finally:
            # Remote daemons are not in mpirun's process group; sweep them.
            self._kill_strays()


def _killpg(p: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def default_mpirun() -> str:
    """mpirun next to the running Python (a venv's), else the one on PATH."""
    here = Path(sys.executable).parent / "mpirun"
    if here.exists():
        return str(here)
    found = shutil.which("mpirun")
    if not found:
        raise FileNotFoundError("no mpirun next to this python or on PATH")
    return found


def _parse_rates(items: list[str], every=None) -> dict[str, str]:
    """['1gbit', 'h3=250mbit'] -> {'*': '1gbit', 'h3': '250mbit'}; with every (names),
    the default is spelled out for each name instead of '*'."""
    rates: dict[str, str] = {}
    for item in items:
        host, sep, rate = item.rpartition("=")
        rates[host if sep else "*"] = rate
    if every is not None and "*" in rates:
        default = rates.pop("*")
        rates = {**{n: default for n in every}, **rates}
    return rates


def split_leaves(names: list[str], count: int) -> dict[str, list[str]]:
    """Hosts in order under leaf1..leafN, as evenly as they go."""
    if not 1 <= count <= min(9, len(names)):
        raise ValueError(f"need 1..{min(9, len(names))} leaves for {len(names)} hosts")
    size, extra = divmod(len(names), count)
    out, at = {}, 0
    for k in range(count):
        n = size + (1 if k < extra else 0)
        out[f"leaf{k + 1}"] = names[at:at + n]
        at += n
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=2, help="number of hosts (h1..hN)")
    ap.add_argument("--names", help="comma-separated host names instead of h1..hN")
    ap.add_argument("--ppn", type=int, default=1, help="ranks per host")
    ap.add_argument("--rate", action="append", default=[],
                    help="link rate, e.g. 1gbit (all hosts), h3=250mbit or h3:eth1=250mbit; "
                         "repeatable")
    ap.add_argument("--rails", type=int, default=1,
                    help="interfaces per host, eth0..ethN-1, each rail on its own bridge and subnet")
    ap.add_argument("--leaves", type=int, default=0,
                    help="split the hosts in order under this many leaf bridges joined by a spine")
    ap.add_argument("--uplink-rate", action="append", default=[],
                    help="leaf uplink rate, e.g. 1gbit (all) or leaf2=250mbit; repeatable")
    ap.add_argument("--topology-out", metavar="FILE",
                    help="write the layout as SLURM's topology.conf to FILE first")
    ap.add_argument("--mpirun", help="mpirun to use (default: next to this python)")
    ap.add_argument("--mpi-arg", action="append", default=[], help="extra mpirun argument")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--exec", action="store_true", help="run the command on the first host only")
    ap.add_argument("--cleanup", action="store_true", help="remove leftovers of dead runs")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.cleanup:
        for ns in cleanup_stale():
            print("removed", ns)
        return 0
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command given (put it after --)")
    names = a.names.split(",") if a.names else None
    names = names or [f"h{i}" for i in range(1, a.hosts + 1)]
    leaves = split_leaves(names, a.leaves) if a.leaves else None
    with FakeCluster(names=names, rates=_parse_rates(a.rate), rails=a.rails, leaves=leaves,
                     uplink_rates=_parse_rates(a.uplink_rate, leaves) or None) as c:
        if a.topology_out:
            Path(a.topology_out).write_text(c.topology_conf())
        try:
            if a.exec:
                r = c.run_on(c.hosts[0], cmd, timeout=a.timeout)
            else:
                r = c.mpirun(cmd, ppn=a.ppn, mpirun=a.mpirun, extra_args=a.mpi_arg,
                             timeout=a.timeout)
        except subprocess.TimeoutExpired as e:
            sys.stdout.write(e.output or "")
            sys.stderr.write(e.stderr or "")
            print(f"fakecluster: timed out after {a.timeout:g} s", file=sys.stderr)
            return 124
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())

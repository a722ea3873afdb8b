"""The switch tree of a job (hosts off leaf switches, each switch off one parent), from SLURM's
topology.conf syntax (docs/fabric.md, "Switches"), a file or what `scontrol show topology` prints."""
from itertools import takewhile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import UsageError
from ..launch.slurm import compress_hostlist, expand_nodelist
from .hostfacts import run_tool

Switch = Optional[str]          # a switch's name; None: the one switch of a job without a topology
Entry = Tuple[str, List[str], List[str], int]     # a SwitchName= line: switch, hosts, switches, line number


class Topology:
    """leaf[host] -> its switch; parent[switch] -> the switch above (absent at the top)."""

    def __init__(self, leaf: Mapping[str, Switch], parent: Mapping[Switch, str],
                 source: Optional[str]) -> None:
        self.leaf, self.parent, self.source = leaf, parent, source

    def up(self, switch: Switch) -> List[Switch]:
        """The switches from this one to the top, itself first."""
        out = [switch]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def uplinks_between(self, leaf_a: Switch, leaf_b: Switch) -> List[Tuple[Switch, Switch]]:
        """The uplinks (switch, parent) a path from leaf_a to leaf_b crosses ([] on one leaf)."""
        a, b = self.up(leaf_a), self.up(leaf_b)
        common = set(a) & set(b)
        return [(s, self.parent.get(s)) for chain in (a, b)
                for s in takewhile(lambda s: s not in common, chain)]


def parse(text: str, source: str) -> List[Entry]:
    """[(switch, [hosts], [switches], line number)] from topology.conf text, or UsageError."""
    entries: List[Entry] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        f = {key.lower(): value for key, sep, value in (t.partition("=") for t in line.split()) if sep}
        if not (name := f.get("switchname")):
            raise UsageError(f"{source} line {n}: expected SwitchName=NAME "
                             f"[Nodes=HOSTLIST] [Switches=LIST], not {line[:60]!r}")
        try:
            hosts, subs = (expand_nodelist(f[key]) if f.get(key) else [] for key in ("nodes", "switches"))
        except ValueError:
            raise UsageError(f"{source} line {n}: a host list it cannot expand: {line[:60]!r}") from None
        entries.append((name, hosts, subs, n))
    if not entries:
        raise UsageError(f"{source}: no SwitchName= line in it")
    return entries


def build(entries: Sequence[Entry], job_hosts: Sequence[str], source: str, strict: bool = True) -> Topology:
    """The Topology of job_hosts; UsageError where it is not a tree or leaves a host out.
    strict (a file for this job): a host not in the job is an error, else dropped."""
    seen = _switch_lines(entries, source)
    leaf, parent = _links(entries, seen, source)
    _check_no_loop(seen, parent, source)
    _check_job_hosts(leaf, job_hosts, source, strict)
    return Topology({h: leaf[h] for h in job_hosts}, parent, source)


def _switch_lines(entries: Sequence[Entry], source: str) -> Dict[str, int]:
    """{switch: its line number}; UsageError where a switch is described twice."""
    seen: Dict[str, int] = {}
    for name, _hosts, _subs, n in entries:
        if name in seen:
            raise UsageError(f"{source} line {n}: switch {name} is described twice "
                             f"(also line {seen[name]})")
        seen[name] = n
    return seen


def _links(entries: Sequence[Entry], seen: Mapping[str, int], source: str
           ) -> Tuple[Dict[str, str], Dict[Switch, str]]:
    """({host: its leaf}, {switch: its parent}); UsageError where a host or switch is under two."""
    leaf: Dict[str, str] = {}
    parent: Dict[Switch, str] = {}
    for name, hosts, subs, n in entries:
        for h in hosts:
            if h in leaf:
                raise UsageError(f"{source}: host {h} is under two switches, {leaf[h]} and "
                                 f"{name}: a host hangs off one leaf")
            leaf[h] = name
        for s in subs:
            if s not in seen:
                raise UsageError(f"{source} line {n}: switch {name} lists {s}, which has no "
                                 f"SwitchName= line")
            if s in parent:
                raise UsageError(f"{source}: switch {s} is under two switches, {parent[s]} "
                                 f"and {name}: the topology must be a tree")
            parent[s] = name
    return leaf, parent


def _check_no_loop(seen: Mapping[str, int], parent: Mapping[Switch, str], source: str) -> None:
    """UsageError where walking up from a switch comes back to where it started."""
    for name in seen:              # a loop: walking up comes back to where it started
        walk, at = [name], name
        while at in parent:
            at = parent[at]
            if at in walk:
                loop = walk[walk.index(at):] + [at]
                raise UsageError(f"{source}: a loop in the switches: {' > '.join(loop)}")
            walk.append(at)


def _check_job_hosts(leaf: Mapping[str, str], job_hosts: Sequence[str], source: str, strict: bool) -> None:
    """UsageError where the topology names hosts not in the job (strict) or leaves some out."""
    job = set(job_hosts)
    extra = [h for h in leaf if h not in job]
    if extra and strict:
        raise UsageError(f"{source} names host{'s' if len(extra) > 1 else ''} not in this job: "
                         f"{compress_hostlist(extra)}")
    missing = [h for h in job_hosts if h not in leaf]
    if missing:
        raise UsageError(f"{source} leaves out host{'s' if len(missing) > 1 else ''} of this "
                         f"job: {compress_hostlist(missing)}")


def read_file(path: str) -> str:
    """--topology FILE's text; UsageError when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(16 << 20).decode()
    except OSError as exc:
        raise UsageError(f"cannot read --topology {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--topology {path} is not text (UTF-8)") from None


def from_slurm() -> Optional[str]:
    """What `scontrol show topology` prints, or None (no SLURM, no topology plugin)."""
    text, _ = run_tool(["scontrol", "show", "topology"])
    return text if text and "SwitchName=" in text else None


def single(job_hosts: Sequence[str]) -> Topology:
    """No topology: every host under one switch (no uplinks to tell apart)."""
    return Topology({h: None for h in job_hosts}, {}, None)

"""NCCL's own diagnostics (NCCL >= 2.31) read into doctor's findings.

NCCL_RUN_RAS_DIAGNOSTICS=1 compares every rank's GPU inventory, CUDA driver, ECC counters,
NVLink state, Xid events and NCCL_* variables at communicator init; NCCL_RUN_DIAGNOSTICS=1
tests every directed GPU pair's P2P path. Both print "NCCL DIAG [OK|INFO] check: text" lines
on standard output (a RAS line may start "host:pid "). The shapes read here are those of
NCCL's src/ras diagnostics and P2P diagnostics sources (docs/commands/doctor.md lists them);
a line of another shape is kept as it is, unread.

Lines name ranks of the probe's communicator, which are doctor's ranks: each is named by its
host and GPU (the CUDA device the probe used)."""
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .findings import ERROR, WARNING, Finding

MIN_VERSION = (2, 31)
VARIABLES = {"NCCL_RUN_RAS_DIAGNOSTICS": "1", "NCCL_RUN_DIAGNOSTICS": "1"}

_LINE = re.compile(r"^(?:.*?\s)??(?:(?P<host>[^\s:]+):(?P<pid>\d+)\s+)?NCCL DIAG\s+"
                   r"\[(?P<level>OK|INFO|WARN)\]\s+(?P<check>[^:]+?):\s*(?P<text>.*?)\s*$")
_RANKS = r"\{(?P<ranks>[\d,]*)(?:,\.\.\.)?\}(?: \(N=(?P<total>\d+)\))?"
_MISMATCH = re.compile(r"(?P<what>[\w-]+ )?mismatch across (?P<n>\d+) ranks in comm \S+?,? rank\(s\) "
                       + _RANKS + r" differ from rank (?P<ref>\d+) \((?P<value>.*)\)$")
_ECC = re.compile(r"(?P<kind>uncorrected|corrected) volatile errors (?:at or above threshold \d+ )?"
                  r"on rank\(s\) " + _RANKS + r" \(worst=(?P<worst>\d+)\)")
_INACTIVE = re.compile(r"inactive link\(s\) on rank\(s\) " + _RANKS)
_ENV_KEY = re.compile(r"mismatch across \d+ ranks in comm \S+ for (?P<key>\S+)$")
_ENV_VALUE = re.compile(r"(?P<key>[^=\s]+)=(?P<value>.*) on rank\(s\) " + _RANKS + "$")
_XID = re.compile(r"^(?P<kind>S?Xid) (?P<code>\d+) detected (?P<count>(?:at least )?\d+) times? "
                  r"(?:\((?P<detail>.*?)\) )?on host (?P<host>\S+?)\.(?:\s+(?P<advice>.*))?$")
_P2P_FAIL = re.compile(r"(?P<what>[^=]+?) srcRank=(?P<src>\d+) srcCudaDev=(?P<srcdev>-?\d+) \S+ "
                       r"dstRank=(?P<dst>\d+) dstCudaDev=(?P<dstdev>-?\d+) \S+ path=(?P<path>\S+) "
                       r"handle=(?P<handle>\S+)")
_P2P_COUNT = re.compile(r"(?:all (?P<all>\d+)|(?P<passed>\d+)/(?P<tested>\d+)) "
                        r"directed GPU P2P edges verified")


@dataclass
class Line:
    level: str               # OK or INFO (as NCCL tags it)
    check: str               # GPU inventory, CUDA driver version, ECC, NVLink, NCCL environment, Xid, p2p...
    text: str
    host: Optional[str]      # the "host:pid" prefix of a RAS line, where printed


def parse(text: str) -> List[Line]:
    """The NCCL DIAG lines of a probe's output, each once (every rank may print the same)."""
    out, seen = [], set()
    for raw in text.splitlines():
        m = _LINE.match(raw)
        if m is None:
            continue
        key = (m["level"], m["check"].strip(), m["text"])
        if key in seen:
            continue
        seen.add(key)
        out.append(Line(m["level"], m["check"].strip(), m["text"], m["host"]))
    return out


Where = Sequence[Tuple[str, int]]    # per rank: (host, CUDA device)


def _ranks(m: "re.Match[str]") -> Tuple[List[int], int]:
    listed = [int(r) for r in m["ranks"].split(",") if r]
    return listed, int(m["total"] or len(listed))


def name(ranks: Sequence[int], total: int, where: Where) -> str:
    """'rank 2 (h2 GPU 0), rank 3 (h2 GPU 1)', with how many more NCCL did not list."""
    text = ", ".join(f"rank {r} ({where[r][0]} GPU {where[r][1]})" if r < len(where) else f"rank {r}"
                     for r in ranks)
    return text + (f" and {total - len(ranks)} more" if total > len(ranks) else "")


def _host(ranks: Sequence[int], where: Where) -> Optional[str]:
    """The one host of these ranks, or None (several, or unknown)."""
    hosts = {where[r][0] for r in ranks if r < len(where)}
    return hosts.pop() if len(hosts) == 1 and all(r < len(where) for r in ranks) else None


_Env = Dict[str, List[str]]     # per NCCL_* variable: its values, each with the ranks that hold it


def _incomplete(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """A check that heard from only part of the job."""
    check, text = line.check, line.text
    if "diagnostics incomplete" not in text:
        return None
    return [Finding(None, f"NCCL's {check} check heard from only part of the job "
                          f"({text.split(', ', 1)[-1]}): its verdict covers those ranks only")]


def _mismatch(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """A GPU inventory or driver that differs across ranks."""
    check, text = line.check, line.text
    if (m := _MISMATCH.search(text)) is None:
        return None
    ranks, total = _ranks(m)
    ref = int(m["ref"])
    what = f"{check} {m['what'] or ''}".strip()
    severity = ERROR if "driver" in check.lower() else WARNING
    return [Finding(_host(ranks, where),
                    f"{what} differs across ranks: {name(ranks, total, where)} "
                    f"{'differ' if total > 1 else 'differs'} from "
                    f"{name([ref], 1, where)}, which has {m['value']} (NCCL DIAG): every GPU "
                    f"of a job needs the same model, count and driver", severity)]


def _ecc(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """ECC errors on some ranks' GPUs."""
    if line.check != "ECC" or (m := _ECC.search(line.text)) is None:
        return None
    ranks, total = _ranks(m)
    bad = m["kind"] == "uncorrected"
    return [Finding(_host(ranks, where),
                    f"{m['kind']} ECC errors on {name(ranks, total, where)} (worst {m['worst']}, "
                    f"NCCL DIAG): " + ("drain the GPU and check nvidia-smi -q -d ECC; a "
                                       "reset clears the volatile count" if bad else
                                       "watch the count (nvidia-smi -q -d ECC)"),
                    ERROR if bad else WARNING)]


def _nvlink(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """Inactive NVLinks on some ranks' GPUs."""
    text = line.text
    if line.check != "NVLink" or (m := _INACTIVE.search(text)) is None:
        return None
    ranks, total = _ranks(m)
    return [Finding(_host(ranks, where),
                    f"NVLink down on {name(ranks, total, where)} (NCCL DIAG: {text}): traffic "
                    f"between these GPUs falls back to slower paths; check nvidia-smi nvlink -s",
                    ERROR)]


def _env_key(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """An NCCL_* variable that differs across ranks: noted, its values follow."""
    if line.check != "NCCL environment" or (m := _ENV_KEY.search(line.text)) is None:
        return None
    env.setdefault(m["key"], [])
    return []


def _env_value(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """One value of an NCCL_* variable and the ranks that hold it: noted."""
    if line.check != "NCCL environment" or (m := _ENV_VALUE.match(line.text)) is None:
        return None
    ranks, total = _ranks(m)
    env.setdefault(m["key"], []).append(f"{m['value']} on {name(ranks, total, where)}")
    return []


def _xid(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """An Xid event on a host."""
    if (m := _XID.match(f"{line.check}: {line.text}")) is None:     # its advice holds a ':'
        return None
    detail = f", {m['detail']}" if m["detail"] else ""
    return [Finding(m["host"], f"{m['kind']} {m['code']} reported {m['count']} "
                               f"time{'s' if m['count'] != '1' else ''}{detail} (NCCL DIAG): "
                               f"{m['advice'] or 'see the NVIDIA Xid documentation'}", ERROR)]


def _p2p_fail(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """A directed GPU pair whose P2P path failed."""
    text = line.text
    if line.check != "p2p" or (m := _P2P_FAIL.search(text)) is None:
        return None
    src, dst = int(m["src"]), int(m["dst"])
    a = where[src][0] if src < len(where) else f"rank {src}"
    b = where[dst][0] if dst < len(where) else f"rank {dst}"
    return [Finding(a if a == b else None,
                    f"P2P path failed NCCL's check ({m['what'].strip()}): from rank {src} "
                    f"({a} GPU {m['srcdev']}) to rank {dst} ({b} GPU {m['dstdev']}), path "
                    f"{m['path']}, handle {m['handle']}; NCCL advises: "
                    f"{text.split('; ', 1)[-1]}", ERROR)]


def _p2p_count(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """How many directed P2P paths passed, where not all did."""
    if line.check != "p2p" or (m := _P2P_COUNT.search(line.text)) is None or not m["passed"]:
        return None
    return [Finding(None, f"only {m['passed']} of {m['tested']} directed GPU P2P paths "
                          f"passed NCCL's check (NCCL DIAG); the failing ones are named "
                          f"above where NCCL printed them", ERROR)]


def _nothing_wrong(line: Line, where: Where, env: _Env) -> Optional[List[Finding]]:
    """A line that says nothing known to be wrong: said in the NCCL lines doctor prints."""
    text = line.text
    if ("unavailable" in text or "no kernel-log source" in text or "truncated" in text
            or "env var(s) differ across ranks" in text):     # a count: the variables come named
        return []
    return None


_READERS: Tuple[Callable[[Line, Where, _Env], Optional[List[Finding]]], ...] = (
    _incomplete, _mismatch, _ecc, _nvlink, _env_key, _env_value, _xid, _p2p_fail, _p2p_count,
    _nothing_wrong)


def _read(line: Line, where: Where, env: _Env) -> List[Finding]:
    """The findings of one line: those of the first reader that knows its shape, else it is unread."""
    for reader in _READERS:
        found = reader(line, where, env)
        if found is not None:
            return found
    return [Finding(line.host, f"unread NCCL diagnostic: NCCL DIAG {line.check}: {line.text}")]


def findings(lines: Sequence[Line], where: Where) -> List[Finding]:
    """doctor's findings from NCCL's lines: every problem they report, named by host and GPU."""
    out: List[Finding] = []
    env_values: _Env = {}
    for line in lines:
        if line.level != "OK":
            out.extend(_read(line, where, env_values))
    for key, values in env_values.items():
        out.append(Finding(None, f"{key} is not the same on every rank (NCCL DIAG): "
                                 + "; ".join(values) + ": set it alike on every rank (mpirun -x)"))
    return out


def version_ok(version: Optional[Tuple[int, ...]]) -> bool:
    return version is not None and tuple(version[:2]) >= MIN_VERSION


def version_text(version: Optional[Tuple[int, ...]]) -> str:
    return "none found" if version is None else ".".join(map(str, version))

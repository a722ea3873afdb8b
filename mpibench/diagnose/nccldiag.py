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
from typing import Dict, List, Optional, Sequence, Tuple

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


def findings(lines: Sequence[Line], where: Where) -> List[Finding]:
    """doctor's findings from NCCL's lines: every problem they report, named by host and GPU."""
    out: List[Finding] = []
    env_values: Dict[str, List[str]] = {}
    for line in lines:
        if line.level == "OK":
            continue
        check, text = line.check, line.text
        said = f"NCCL DIAG {check}: {text}"
        if "diagnostics incomplete" in text:
            out.append(Finding(None, f"NCCL's {check} check heard from only part of the job "
                                     f"({text.split(', ', 1)[-1]}): its verdict covers those ranks only"))
        elif (m := _MISMATCH.search(text)) is not None:
            ranks, total = _ranks(m)
            ref = int(m["ref"])
            what = f"{check} {m['what'] or ''}".strip()
            severity = ERROR if "driver" in check.lower() else WARNING
            out.append(Finding(_host(ranks, where),
                               f"{what} differs across ranks: {name(ranks, total, where)} "
                               f"{'differ' if total > 1 else 'differs'} from "
                               f"{name([ref], 1, where)}, which has {m['value']} (NCCL DIAG): every GPU "
                               f"of a job needs the same model, count and driver", severity))
        elif check == "ECC" and (m := _ECC.search(text)) is not None:
            ranks, total = _ranks(m)
            bad = m["kind"] == "uncorrected"
            out.append(Finding(_host(ranks, where),
                               f"{m['kind']} ECC errors on {name(ranks, total, where)} (worst {m['worst']}, "
                               f"NCCL DIAG): " + ("drain the GPU and check nvidia-smi -q -d ECC; a "
                                                  "reset clears the volatile count" if bad else
                                                  "watch the count (nvidia-smi -q -d ECC)"),
                               ERROR if bad else WARNING))
        elif check == "NVLink" and (m := _INACTIVE.search(text)) is not None:
            ranks, total = _ranks(m)
            out.append(Finding(_host(ranks, where),
                               f"NVLink down on {name(ranks, total, where)} (NCCL DIAG: {text}): traffic "
                               f"between these GPUs falls back to slower paths; check nvidia-smi nvlink -s",
                               ERROR))
        elif check == "NCCL environment" and (m := _ENV_KEY.search(text)) is not None:
            env_values.setdefault(m["key"], [])
        elif check == "NCCL environment" and (m := _ENV_VALUE.match(text)) is not None:
            ranks, total = _ranks(m)
            env_values.setdefault(m["key"], []).append(
                f"{m['value']} on {name(ranks, total, where)}")
        elif (m := _XID.match(f"{check}: {text}")) is not None:     # its advice holds a ':'
            detail = f", {m['detail']}" if m["detail"] else ""
            out.append(Finding(m["host"], f"{m['kind']} {m['code']} reported {m['count']} "
                                          f"time{'s' if m['count'] != '1' else ''}{detail} (NCCL DIAG): "
                                          f"{m['advice'] or 'see the NVIDIA Xid documentation'}", ERROR))
        elif check == "p2p" and (m := _P2P_FAIL.search(text)) is not None:
            src, dst = int(m["src"]), int(m["dst"])
            a = where[src][0] if src < len(where) else f"rank {src}"
            b = where[dst][0] if dst < len(where) else f"rank {dst}"
            out.append(Finding(a if a == b else None,
                               f"P2P path failed NCCL's check ({m['what'].strip()}): from rank {src} "
                               f"({a} GPU {m['srcdev']}) to rank {dst} ({b} GPU {m['dstdev']}), path "
                               f"{m['path']}, handle {m['handle']}; NCCL advises: "
                               f"{text.split('; ', 1)[-1]}", ERROR))
        elif check == "p2p" and (m := _P2P_COUNT.search(text)) is not None and m["passed"]:
            out.append(Finding(None, f"only {m['passed']} of {m['tested']} directed GPU P2P paths "
                                     f"passed NCCL's check (NCCL DIAG); the failing ones are named "
                                     f"above where NCCL printed them", ERROR))
        elif ("unavailable" in text or "no kernel-log source" in text or "truncated" in text
              or "env var(s) differ across ranks" in text):     # a count: the variables come named
            continue            # nothing known to be wrong: said in the NCCL lines doctor prints
        else:
            out.append(Finding(line.host, f"unread NCCL diagnostic: {said}"))
    for key, values in env_values.items():
        out.append(Finding(None, f"{key} is not the same on every rank (NCCL DIAG): "
                                 + "; ".join(values) + ": set it alike on every rank (mpirun -x)"))
    return out


def version_ok(version: Optional[Tuple[int, ...]]) -> bool:
    return version is not None and tuple(version[:2]) >= MIN_VERSION


def version_text(version: Optional[Tuple[int, ...]]) -> str:
    return "none found" if version is None else ".".join(map(str, version))

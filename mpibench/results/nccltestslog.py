"""nccl-tests' printed output as users keep it, in every table layout since before 2.13,
and mpibench's own, read as a results document. How a test's collective and rank count are
found, and what is refused with the line: docs/nccl-tests-logs.md.
"""
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from ..launch import faults
from ..measure.collectives import REGISTRY
from ..measure.collectives.base import Collective
from ..measure.dtypes import DTYPES
from .nccltests import Unreadable, collective_name, document, mode_figures, row_of

_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")         # mpirun --tag-output
_COLUMNS = re.compile(r"#\s*size\s+count\s+type\b")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_NAME = re.compile(r"#\s*Collective(?: test starting)?:\s*(\S+)")   # nccl-tests', mpibench's title
_SETTINGS = re.compile(r"#\s*(?:nccl-tests version|nThread\s+\d+\s+nGpus\s+\d+\s+minBytes)")
_SWEEP = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)")
_REDUCED = re.compile(r"#\s*Reducing maxBytes to\s+(\d+)")
_MPIBENCH = re.compile(r"#\s*mpibench [a-z_]+:")
_AVERAGE = re.compile(r"#\s*Avg bus bandwidth(\s+\S+)?\s*:\s*(\S+)")
_BACKEND = re.compile(r"#\s*backend (\w+), launcher")       # mpibench's header
_CONCLUDED = re.compile(r"#\s*Collective test concluded")
_COMMAND = re.compile(r"(?:^|[\s/])([a-z]+(?:_[a-z]+)*)_perf(?:_mpi)?(?:\s|$)")
_NUMBER = re.compile(r"^[-+]?(\d+)?(?:\.(\d*))?(?:[eE]([-+]?\d+))?$")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d$")
_SIGN = (r"nccl-tests version|Collective test starting:|nThread\s+\d+\s+nGpus"
         r"|Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid|size\s+count\s+type\b")
_SIGNS = re.compile(rf"#?\s*(?:{_SIGN})")
_ELSIZE = {**{d.label: d.size for d in DTYPES.values()},
           "uint32": 4, "uint64": 8, "f8e4m3": 1, "f8e5m2": 1}
# Lines nccl-tests prints behind '#', as some published logs have them without it.
_BARE = re.compile(rf"(?:{_SIGN}|Using devices|\(B\)\s+\(elements\)|out-of-place\b"
                   r"|Out of bounds values\s*:|Avg bus bandwidth\b)")
# Launchers' line labels: srun -l (" 3: "), hydra's -prepend-rank ("[3] "), pdsh and
# clush ("host: "); Open MPI's --tag-output is _TAG.
_LABELS = (re.compile(r"\s*\d+: ?"), re.compile(r"\[\d+\] ?"), re.compile(r"[A-Za-z][\w.-]*: "))
_OWN = re.compile(r"\s*(?:#|\d+\s+\d+\s+\S+\s)")        # a '#' line or a table row
# the names files carry: nccl_alltoall.log, allgather_run2.txt, reduce-scatter.out
_FILE_NAMES = {name: c.name for c in REGISTRY.values() for name in (c.name, *c.aliases)}
_LEAD = ("redop", "root")
_SPREAD = ["out", "in"]     # mpibench's "rank spread" columns, after all of nccl-tests' own

Num = Tuple[float, float]   # a printed number: (value, half a unit of its last printed digit)
Average = Tuple[Optional[Num], int]         # an average line's figure (None: n/a) and line
Bws = Tuple[Optional[Num], Optional[Num]]   # a mode's (algbw, busbw)
Path = Union[str, "os.PathLike[str]"]
Layout = Tuple[List[str], List[List[str]], int]  # redop/root columns, each mode's, spread cells


@dataclass
class Header:
    """The lines above a table: rank lines, test name, *_perf command line, the sweep asked for."""
    ranks: Dict[int, str] = field(default_factory=dict)
    name: Optional[str] = None
    command: Optional[str] = None
    used: bool = False          # a table stands under it
    ours: bool = False          # mpibench's: it stands over all of its tables
    sweep: Optional[Tuple[int, int, int, str]] = None   # -b, -e, -f or -i, factor or bytes
    sweep_line: int = 0


@dataclass
class Cells:
    """A table row: its figures in mpibench's keys, its bandwidths as printed for the checks."""
    size: int
    count: int
    label: str
    redop: Optional[str]        # None: no redop column; "": an empty cell
    root: int
    modes: Dict[str, Dict[str, Any]]
    bws: List[Bws]
    line: int


@dataclass
class Test:
    """A table: its header, layout and rows, and the average that closed it."""
    name: Optional[str]
    command: Optional[str]
    header: Header
    layout: Layout
    line: int
    backend: str
    ours: bool
    rows: List[Cells] = field(default_factory=list)
    average: Optional[Average] = None


@dataclass
class State:
    """A reading of the lines so far."""
    header: Header = field(default_factory=Header)      # the header being read
    open: List[Test] = field(default_factory=list)      # whose rows may follow: two runs' at most
    tests: List[Test] = field(default_factory=list)
    group: List[Test] = field(default_factory=list)     # the tests the next average closes
    shared: List[Tuple[List[Test], Optional[Num], int]] = field(default_factory=list)  # over several
    backend: Optional[str] = None                       # mpibench's, once its header names it


def looks_like_text(text: str) -> bool:
    """Whether text holds nccl-tests' (or mpibench's) printed table or its header lines."""
    return _SIGNS.search(text) is not None


def number(token: str) -> Optional[Num]:
    """(value, half a unit of its last printed digit), None for N/A; Unreadable if no number."""
    if token in ("N/A", "n/a"):
        return None
    m = _NUMBER.match(token)
    if not m or not (m.group(1) or m.group(2)):
        raise Unreadable(f"{token!r} is not a number")
    decimals = len(m.group(2) or "")
    exponent = int(m.group(3) or 0)
    return float(token), 0.5 * 10.0 ** (exponent - decimals)


# ---- one pass over the lines: tests, their rows and averages ----
def _layout(line: str, n: int) -> Layout:
    names = line.lstrip("#").split()
    if "time" not in names:
        raise Unreadable(f"line {n}: column names without 'time'")
    first = names.index("time")
    lead = names[3:first]
    if any(x not in _LEAD for x in lead):
        raise Unreadable(f"line {n}: unknown column {next(x for x in lead if x not in _LEAD)!r}")
    rest = names[first:]
    spread = len(rest) > 2 and rest[-2:] == _SPREAD
    rest = rest[:-2] if spread else rest
    cut = rest.index("time", 1) if "time" in rest[1:] else len(rest)
    groups = [g for g in (rest[:cut], rest[cut:]) if g]
    for g in groups:
        if any(x not in g for x in ("time", "algbw", "busbw")) or len(g) < 4:
            raise Unreadable(f"line {n}: a mode's columns are {' '.join(g)}, expected time "
                             f"algbw busbw and #wrong or error")
    return lead, groups, 2 if spread else 0


def _mode(values: List[Optional[Num]], names: List[str]) -> Tuple[Dict[str, Any], Bws]:
    """One mode's cells -> mpibench's figures (with half units kept aside for checks)."""
    cells = dict(zip(names, values))
    first = {k: None if v is None else v[0] for k, v in cells.items()}
    out = mode_figures(first["time"], first["algbw"], first["busbw"], None)
    if (wrong := first.get("#wrong")) is not None:
        if wrong < 0 or wrong != int(wrong):
            raise Unreadable(f"#wrong {wrong:g} is not a count")
        out["nwrong"] = int(wrong)
    if first.get("error") is not None:    # before 2.13: the largest error
        out["max_error"] = first["error"]
    return out, (cells["algbw"], cells["busbw"])


def _row(tokens: List[str], layout: Layout, n: int) -> Cells:
    lead, groups, spread = layout
    if len(tokens) >= 2 and _STAMP.match(tokens[-2]):                       # -T 1
        tokens = tokens[:-2]
    if spread:                  # mpibench's rank spread per mode: not nccl-tests' figures
        if len(tokens) < 3 + spread:
            raise Unreadable(f"line {n}: fewer cells than the column names have")
        tokens = tokens[:-spread]
    size, count, label, rest = int(tokens[0]), int(tokens[1]), tokens[2], tokens[3:]
    if _NUMBER.match(label):
        raise Unreadable(f"line {n}: {label!r} where the type should be")
    redop, root = _lead(lead, rest, n)
    modes, bws = _figures(groups, rest, n)
    return Cells(size, count, label, redop, root, modes, bws, n)


def _lead(lead: List[str], rest: List[str], n: int) -> Tuple[Optional[str], int]:
    """(redop, root) from the cells before the figures, taken off rest."""
    redop, root = None, -1
    for col in lead:
        if col == "redop":       # empty before 2.13 for collectives without one
            redop = rest.pop(0) if rest and not _NUMBER.match(rest[0]) and \
                rest[0] not in ("N/A", "n/a") else ""
        elif not rest or not re.fullmatch(r"-?\d+", rest[0]):
            raise Unreadable(f"line {n}: no root where the column names have one")
        else:
            root = int(rest.pop(0))
    return redop, root


def _figures(groups: List[List[str]], rest: List[str], n: int) -> Tuple[Dict[str, Any], List[Bws]]:
    """Each mode's figures from the cells after the lead ones, every cell used."""
    modes, bws = {}, []
    keyed = list(zip(("out_of_place", "in_place"), groups))
    if len(keyed) == 2 and len(rest) == len(groups[1]) and rest[:1] != ["n/a"]:
        keyed = keyed[1:]                # one mode's figures: in place only (trace replay)
    for key, names in keyed:
        if rest[:1] == ["n/a"]:          # mpibench: this mode is not measured
            rest.pop(0)
            continue
        if len(rest) < len(names):
            raise Unreadable(f"line {n}: {len(rest)} figures where {len(names)} columns "
                             f"({' '.join(names)}) remain")
        values = [number(x) for x in rest[:len(names)]]
        rest = rest[len(names):]
        modes[key], bw = _mode(values, names)
        bws.append(bw)
    if rest:
        raise Unreadable(f"line {n}: {len(rest)} figures more than the column names have")
    if not modes:
        raise Unreadable(f"line {n}: neither mode measured")
    return modes, bws


def _next_header(state: State) -> None:
    """A new header where the current one has its table (mpibench's stands over all of its)."""
    if state.header.used and not state.header.ours:
        state.header = Header()


def _unlabel(lines: List[str]) -> List[str]:
    """The lines without the launcher label that most of the log's own lines start with."""
    own = sum(1 for x in lines if _OWN.match(x))
    for label in _LABELS:
        ends = [m.end() if m else 0 for m in map(label.match, lines)]
        if sum(1 for x, e in zip(lines, ends) if e and _OWN.match(x, e)) > own / 2:
            return [x[e:] for x, e in zip(lines, ends)]
    return lines


_SUMMARY = "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY:"
_SUMMARY_RANK = re.compile(r"#\s+rank=\d+\s+send_bytes=")


def _rejoin(lines: List[str]) -> List[str]:
    """alltoallv_perf's rows whole again: with NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1 it prints
    each mode's per-rank summary inside the row (after its first cells, then after the
    out-of-place cells). The row's cells go to the line where it started, the summary's rank
    lines stay as comments, and every line keeps its number (joined ones become blank)."""
    out: List[str] = []
    row = -1                          # the line of the row being joined (-1: none)
    for line in lines:
        cut = line.find(_SUMMARY)
        if row >= 0 and _SUMMARY_RANK.match(line.strip()):
            out.append(line)
        elif cut > 0 and row < 0:
            row = len(out)
            out.append(line[:cut])
        elif row >= 0 and (cut > 0 or (cut < 0 and line.strip() and not line.lstrip().startswith("#"))):
            out[row] += " " + (line[:cut] if cut > 0 else line)
            out.append("")
            row = row if cut > 0 else -1
        else:
            out.append(line)
    return out


def scan(text: str) -> Tuple[List[Test], List[Tuple[List[Test], Optional[Num], int]]]:
    """The tests in text, and the averages printed for several tables at once (mpibench's)."""
    state = State()
    lines = [_TAG.sub(" ", raw) if ">:" in raw else raw for raw in text.splitlines()]
    for n, line in enumerate(_rejoin(_unlabel(lines)), 1):
        line = line.strip()
        if not line:
            continue
        if not line.startswith("#") and _BARE.match(line):
            line = "# " + line
        if line.startswith("#"):
            _comment_line(state, line, n)
        elif len(tokens := line.split()) >= 5 and tokens[0].isdigit() and tokens[1].isdigit():
            _table_row(state, tokens, line, n)
        elif "_perf" in line and "NCCL INFO" not in line and (m := _COMMAND.search(line)) and \
                (collective_name(m.group(1)) in REGISTRY or m.group(1) == "hypercube"):
            _next_header(state)       # a command line naming nccl-tests' program: the next table's
            state.header.command = m.group(1)
    return [t for t in state.tests if t.rows], state.shared


def _table_row(state: State, tokens: List[str], line: str, n: int) -> None:
    """Adds the row to the one open test it fits (of two runs' at most); else Unreadable."""
    tests = state.open
    if not tests:
        raise Unreadable(f"line {n}: a table row with no column names above it "
                         f"(size count type ...)" if not state.tests else
                         f"line {n}: a table row after its test's average or "
                         f"end, with no column names above it")
    if len(tests) == 1:
        try:
            tests[0].rows.append(_row(tokens, tests[0].layout, n))
        except Unreadable as exc:
            raise Unreadable(str(exc) if str(exc).startswith("line ") else
                             f"line {n}: {exc}") from None
        except (ValueError, IndexError):
            raise Unreadable(f"line {n}: not a table row: {line[:60]!r}") from None
        return
    fits = []
    for t in tests:
        try:
            row = _row(list(tokens), t.layout, n)
        except (Unreadable, ValueError, IndexError):
            continue
        if _continues(t, row):
            fits.append((t, row))
    if len(fits) != 1:
        raise Unreadable(f"line {n}: two runs wrote into this log at once (tables at "
                         f"{_two_runs(tests)}) and this row fits "
                         f"{'both' if fits else 'neither'}: split the log by run")
    fits[0][0].rows.append(fits[0][1])


def _two_runs(tests: List[Test]) -> str:
    return " and ".join(f"line {t.line}" for t in tests)


def _series_key(r: Cells) -> Tuple[str, Optional[str], int]:
    """nccl-tests sweeps the sizes once per type, redop and root (-d/-o/-r all)."""
    return r.label, r.redop, r.root


def _continues(test: Test, row: Cells) -> bool:
    """Whether row can be test's next: sizes growing along the sweep, and the shape of its
    first row (redop, root, size / count, busbw / algbw) or of the collective the log names."""
    series = [r for r in test.rows if _series_key(r) == _series_key(row)]
    if series and series[-1].size > row.size:
        return False
    wanted = _requested(test.header.sweep) if test.header.sweep else None
    if wanted and (len(series) >= len(wanted) or row.size > wanted[len(series)]):
        return False
    coll = REGISTRY.get(collective_name(test.name or ""))
    if coll is not None:
        return ranks_for(coll, [row], test.layout, test.header.ranks)[0] is not None
    if not test.rows:
        return True
    first = test.rows[0]
    if (first.redop, first.root >= 0) != (row.redop, row.root >= 0):
        return False
    ks = [round(k, 6) for k, _ in _ks([first, row])]
    if len(ks) == 2 and ks[0] != ks[1]:
        return False
    bounds = _ratio_bounds([first, row])
    return all(lo <= b[1] + 1e-9 and b[0] <= hi + 1e-9 for lo, hi, _ in bounds for b in bounds)


def _comment_line(state: State, line: str, n: int) -> None:
    """A '#' line: rank line, average, column names, test name, title, sweep or a test's end."""
    for pattern, handle in _COMMENTS:
        if (m := pattern.match(line)) and handle(state, m, n) is not False:
            return


def _rank_line(state: State, m: "re.Match[str]", n: int) -> None:
    # rank lines come in a header, each rank once: one elsewhere means lines of two
    # runs mixed, and a rank count read from them would be wrong
    header, rank = state.header, int(m.group(1))
    if header.used and not header.ours and _checking():
        raise Unreadable(f"line {n}: a rank line after its run's table, with no "
                         f"header (# nThread ...) before it")
    if rank in header.ranks and not header.ours and _checking():
        raise Unreadable(f"line {n}: rank {rank} listed twice in one header")
    header.ranks[rank] = m.group(2)


def _columns_line(state: State, m: "re.Match[str]", n: int) -> None:
    """A test: its name and command from the header."""
    header = state.header
    test = Test(header.name, header.command, header, _layout(m.string, n), n,
                state.backend or "nccl", header.ours or bool(state.backend))
    header.used, header.name = True, None
    # mpibench prints its tables one after the other; nccl-tests' runs may share a stream
    state.open = [test] if test.ours else state.open + [test]
    state.tests.append(test)
    state.group.append(test)


def _name_line(state: State, m: "re.Match[str]", n: int) -> None:
    _next_header(state)
    state.header.name = m.group(1)


def _title_line(state: State, m: "re.Match[str]", n: int) -> None:
    """mpibench's title."""
    state.header, state.open, state.group = Header(ours=True), [], []


def _backend_line(state: State, m: "re.Match[str]", n: int) -> None:
    """mpibench's, whatever its header looks like."""
    state.backend = m.group(1)


def _settings_line(state: State, m: "re.Match[str]", n: int) -> None:
    _next_header(state)
    if sweep := _SWEEP.search(m.string):
        if state.header.sweep and _checking():
            raise Unreadable(f"line {n}: a second run's header (# nThread ...) before the "
                             f"table of the run whose header is at line "
                             f"{state.header.sweep_line}: two runs wrote into this "
                             f"log at once; split it by run")
        state.header.sweep_line = n
        state.header.sweep = int(sweep.group(1)), int(sweep.group(2)), int(sweep.group(3)), sweep.group(4)


def _reduced_line(state: State, m: "re.Match[str]", n: int) -> Optional[bool]:
    if not state.header.sweep:
        return False
    low, _, step, kind = state.header.sweep
    state.header.sweep = low, int(m.group(1)), step, kind
    return None


def _concluded_line(state: State, m: "re.Match[str]", n: int) -> None:
    state.open = []


def _average_line(state: State, m: "re.Match[str]", n: int) -> None:
    """Gives the average to the table above it, or shares it among the several above; they end here."""
    group = state.group
    if m.group(1) is None:                  # "Avg bus bandwidth gloo": per backend
        value = number(m.group(2)) if _NUMBER.match(m.group(2)) else None  # n/a, nan
        if len(group) > 1 and not any(t.ours for t in group) and value is not None:
            # nccl-tests: one average per run
            fits = [t for t in group if check_average(t.rows, value, n, "", raises=False)]
            if len(fits) != 1:
                raise Unreadable(f"line {n}: an average with the tables at {_two_runs(group)} "
                                 f"open, the mean of {'both' if fits else 'neither'}: two runs "
                                 f"wrote into this log at once; split it by run")
            state.group = [t for t in group if t is not fits[0]]
            state.open = [t for t in state.open if t is not fits[0]]
            fits[0].average = (value, n)
            return
        if len(group) == 1:
            group[0].average = (value, n)
        elif group:
            state.shared.append((group, value, n))
    state.group, state.open = [], []


_COMMENTS: Tuple[Tuple["re.Pattern[str]", Callable[[State, "re.Match[str]", int], Optional[bool]]], ...] = (
    (_RANK, _rank_line), (_AVERAGE, _average_line), (_COLUMNS, _columns_line), (_NAME, _name_line),
    (_MPIBENCH, _title_line), (_BACKEND, _backend_line), (_SETTINGS, _settings_line),
    (_REDUCED, _reduced_line), (_CONCLUDED, _concluded_line))


# ---- what each test is: collective and ranks ----
def _spreads(coll: Collective) -> bool:
    """Whether the printed size is count x element size x n (else count x element size)."""
    c = coll.counts(3 * 64, 4, 3)
    return bool(coll.bw_bytes(c, 4, 3) == 3 * c.param * 4)


def _ratio_bounds(rows: List[Cells]) -> List[Tuple[float, float, int]]:
    """[(lo, hi, line)] of busbw / algbw, as far as the printed digits allow."""
    return [(max(0.0, bus[0] - bus[1]) / (alg[0] + alg[1]), (bus[0] + bus[1]) / (alg[0] - alg[1]),
             r.line) for r in rows for alg, bus in r.bws
            if alg is not None and bus is not None and alg[0] - alg[1] > 0]


def _ks(rows: List[Cells]) -> List[Tuple[float, int]]:
    """size / (count x element size) of every row where that is defined."""
    return [(r.size / (r.count * _ELSIZE[r.label]), r.line) for r in rows
            if _ELSIZE.get(r.label) and r.count > 0]


def _pattern(coll: Collective, rows: List[Cells], layout: Layout) -> Optional[str]:
    """Why the redop / root cells rule coll out, or None."""
    lead = layout[0]
    for r in rows:
        if "root" in lead and (r.root >= 0) != coll.rooted:
            return f"line {r.line}: root {r.root} (a {'' if coll.rooted else 'non-'}" \
                   f"rooted collective prints {'a rank' if coll.rooted else '-1'})"
        if "root" not in lead and coll.rooted:
            return "no root column"
        if r.redop in ("", "none") and coll.reduces:
            return f"line {r.line}: no reduction op"
        if r.redop not in (None, "", "none") and not coll.reduces and not coll.any_redop:
            return f"line {r.line}: reduction op {r.redop}"
        if r.redop is None and coll.reduces:
            return "no redop column"
    return None


Span = Tuple[int, Optional[int]]       # the rank counts rows allow: lo..hi (None: no bound)


def ranks_for(coll: Collective, rows: List[Cells], layout: Layout,
              lines: Dict[int, str]) -> Tuple[Optional[Span], Optional[str]]:
    """(set of rank counts the rows allow, as an interval lo..hi, or None with the reason)."""
    if why := _pattern(coll, rows, layout):
        return None, why
    # every rank's line gives the rank count, a pasted tail of them its least
    top = max(lines) + 1 if lines else 1
    sized = _by_sizes(coll, rows, float(top), top if set(lines) == set(range(top)) else math.inf)
    if isinstance(sized, str):
        return None, sized
    rated = _by_ratios(coll, rows, layout, lines, *sized)
    if isinstance(rated, str):
        return None, rated
    lo, hi = rated
    return (math.ceil(lo), math.floor(hi) if hi < math.inf else None), None


def _by_sizes(coll: Collective, rows: List[Cells], lo: float, hi: float) -> Union[Tuple[float, float], str]:
    """The rank counts lo..hi narrowed by size / (count x element size), or why none fits."""
    for k, at in [] if coll.irregular else _ks(rows):     # alltoallv: size follows no count
        if _spreads(coll):
            if k != int(k) or not lo <= k <= hi:
                return f"line {at}: size / (count x element size) is {k:g}, not the " \
                       f"rank count" + (f" {int(lo)}" if lo == hi else "")
            lo = hi = k
        elif k != 1:
            return f"line {at}: size is {k:g} x count x element size, not 1 x"
    return lo, hi


def _by_ratios(coll: Collective, rows: List[Cells], layout: Layout, lines: Dict[int, str], lo: float,
               hi: float) -> Union[Tuple[float, float], str]:
    """The rank counts lo..hi narrowed by busbw / algbw: a * (n-1)/n where the factor varies with
    n, else the constant a; or why none fits."""
    two, three = coll.busbw_factor(2), coll.busbw_factor(3)
    varies = two != three
    a = 2 * two if varies else two
    if varies and _scaled_algbw(coll, rows, layout):
        a, varies = 1.0, False               # before June 2020: busbw = algbw
    eps = 1e-9
    for rlo, rhi, at in _ratio_bounds(rows):
        if not varies:
            if not rlo - eps <= a <= rhi + eps:
                return f"line {at}: busbw / algbw is {rlo:.4g}-{rhi:.4g}, not {a:g}"
            continue
        # a (n-1)/n in [rlo, rhi]  <=>  1/(1 - rlo/a) <= n <= 1/(1 - rhi/a)
        nlo = 1 / (1 - rlo / a) if rlo < a else math.inf
        nhi = 1 / (1 - rhi / a) if rhi < a else math.inf
        lo, hi = max(lo, nlo - eps), min(hi, nhi + eps)
        if lo == math.inf or (hi < math.inf and math.ceil(lo) > math.floor(hi)):
            return f"line {at}: busbw / algbw is {rlo:.4g}-{rhi:.4g}, which " \
                   f"{'' if a == 1 else format(a, 'g')}(n-1)/n gives for no rank count" + \
                   (f" n = {int(lo)} (its rank lines)" if lines and lo == hi else " the other rows allow")
    return lo, hi


def _scaled_algbw(coll: Collective, rows: List[Cells], layout: Layout) -> bool:
    """Whether all_gather or reduce_scatter printed algbw x (n-1)/n (busbw = algbw), as before
    June 2020: no #wrong column (before 2.13), size / count giving n > 1, digits ruling out (n-1)/n."""
    if not coll.algbw_scaled_before_2020 or \
            any("#wrong" in g for g in layout[1]):
        return False
    ks = {k for k, _ in _ks(rows)}
    if len(ks) != 1 or min(ks) < 2 or min(ks) != int(min(ks)):
        return False
    share = (min(ks) - 1) / min(ks)
    bounds = _ratio_bounds(rows)
    return all(lo - 1e-9 <= 1 <= hi + 1e-9 for lo, hi, _ in bounds) and \
        any(not lo - 1e-9 <= share <= hi + 1e-9 for lo, hi, _ in bounds)


def _named_by_file(source: Optional[Path]) -> Optional[str]:
    """The one collective a file's name names (nccl_alltoall.log: all_to_all), or None."""
    name = re.sub(r"[^a-z]+", "_", os.path.basename(source or "").lower())
    found = set()
    for alias, coll in sorted(_FILE_NAMES.items(), key=lambda x: -len(x[0])):
        if hit := re.search(rf"(?:^|_){alias}(?:_|$)", name):
            found.add(coll)
            name = name[:hit.start()] + "_" + name[hit.end():]
    return found.pop() if len(found) == 1 else None


def resolve(test: Test, hint: Optional[str], source: Optional[Path]) -> Tuple[str, Optional[int], str]:
    """(collective, ranks or None, how the collective was known)."""
    for name, how in ((test.name, "the log"), (hint, "--collective"),
                      (test.command, "the command line in the log"),
                      (_named_by_file(source), "the file's name")):
        if name and (got := _by_name(test, name, how)):
            return got
    return _by_rows(test)


def _by_name(test: Test, name: str, how: str) -> Optional[Tuple[str, Optional[int], str]]:
    """The collective a name gives, checked against the rows; None where the name does not decide."""
    lines = test.header.ranks
    coll = collective_name(name)
    if coll not in REGISTRY:
        if how == "the log":            # a test mpibench has no model of: read as printed
            top = max(lines) + 1 if lines else 0
            return coll, top if lines and set(lines) == set(range(top)) else None, how
        if how == "--collective":
            raise Unreadable(f"--collective {name}: not a collective mpibench knows ({', '.join(REGISTRY)})")
        return None
    span, why = ranks_for(REGISTRY[coll], test.rows, test.layout, lines)
    if span is None and how == "the file's name":
        return None                     # a weaker sign than the rows: they decide
    if span is None:
        raise Unreadable(f"the table at line {test.line} is not {coll} (named by {how}): {why}")
    return coll, _exact(span), how


def _by_rows(test: Test) -> Tuple[str, Optional[int], str]:
    """The one collective the rows fit (alltoallv only by name: its rows fit every alltoall's)."""
    rows, layout, lines = test.rows, test.layout, test.header.ranks
    fits = {c.name: span for c in REGISTRY.values()
            if not c.irregular and (span := ranks_for(c, rows, layout, lines)[0]) is not None}
    how = "its rows (redop, root, size / count, busbw / algbw)"
    modes, groups = [r.modes for r in rows], layout[1]
    # in-place #wrong N/A on every row and out of place checked: nccl-tests checks no in-place
    # result of these
    if len(fits) > 1 and len(groups) > 1 and "#wrong" in groups[1] and \
            all(m.get("in_place", {"nwrong": None})["nwrong"] is None for m in modes) and \
            any(m.get("out_of_place", {}).get("nwrong") is not None for m in modes):
        fits = {k: v for k, v in fits.items() if not REGISTRY[k].in_place_checked}
        how = "its rows and its in-place #wrong (N/A on every row)"
    if len(fits) == 1:
        (coll, span), = fits.items()
        return coll, _exact(span), how
    if not fits:
        raise Unreadable(f"line {rows[0].line}: the rows fit no collective mpibench knows "
                         f"(redop, root, size / count and busbw / algbw)")
    raise Unreadable(f"line {rows[0].line}: the log does not name the collective of this table, "
                     f"and its rows fit {', '.join(fits)}: give --collective NAME")


def _exact(span: Span) -> Optional[int]:
    return span[0] if span[0] == span[1] else None


# ---- checks that keep mixed or cut logs from reading as figures ----
def _checking() -> bool:
    """False only under the test fault switch trustlogs (see launch/faults.py)."""
    return faults.get("trustlogs", 0) is None


def _requested(sweep: Tuple[int, int, int, str], limit: int = 4096) -> Optional[List[int]]:
    """The sizes nccl-tests' header asks for (-b, -e, -f or -i), or None when it cannot say."""
    low, high, step, kind = sweep
    out: List[int] = []
    size = low
    while size <= high and len(out) <= limit:
        out.append(size)
        if (kind == "factor" and step < 2) or (kind == "bytes" and step < 1):
            break
        size = size * step if kind == "factor" else size + step
    return out if len(out) <= limit else None


def _sizes_forward(test: Test) -> None:
    """Sizes grow along each series, and an ended table has a row per size its header asks for."""
    if not _checking():
        return
    sweep = test.header.sweep
    end = test.average[1] if test.average is not None else None     # the average's line
    wanted = _requested(sweep) if sweep and end is not None else None
    series: Dict[Tuple[str, Optional[str], int], List[Cells]] = {}
    for r in test.rows:
        series.setdefault(_series_key(r), []).append(r)
    for rows in series.values():
        for last, r in zip(rows, rows[1:]):
            if r.size < last.size:
                raise Unreadable(f"line {r.line}: size {r.size} after {last.size} "
                                 f"(line {last.line}): rows of two runs with no header "
                                 f"between them")
        if wanted is None:
            continue
        if len(rows) != len(wanted) or any(r.size > w for r, w in zip(rows, wanted)):
            raise Unreadable(f"line {end}: the header asks for {len(wanted)} "
                             f"sizes ({wanted[0]} to {wanted[-1]} bytes), the table above has "
                             f"{len(rows)} rows of {rows[0].label}: rows are missing or "
                             f"come from another run")


def check_average(rows: Iterable[Cells], average: Optional[Num], line: int, what: str,
                  raises: bool = True) -> bool:
    """Whether the average is the mean of the printed busbws, to their digits (else Unreadable if raises)."""
    cells = [bus for r in rows for _, bus in r.bws if bus is not None]
    if average is None or not _checking() or not cells:
        return True
    lo = sum(b - h for b, h in cells) / len(cells)
    hi = sum(b + h for b, h in cells) / len(cells)
    value, half = average
    fits = lo - half - 1e-9 <= value <= hi + half + 1e-9
    if not fits and raises:
        raise Unreadable(f"line {line}: Avg bus bandwidth {value:g} is not the mean of the "
                         f"{len(cells)} busbw figures of {what} ({(lo + hi) / 2:.6g}): rows "
                         f"are missing or come from another test")
    return fits


# ---- the document ----
def _test_rows(t: Test, i: int, many: bool, coll: str, ranks: Optional[int],
               scaled: bool) -> List[Dict[str, Any]]:
    """One table's rows as document rows (i: its number, written where the log has several)."""
    model = REGISTRY.get(coll)
    out = []
    for r in t.rows:
        if scaled and ranks:      # algbw printed x (n-1)/n -> size / time, as now
            for m in r.modes.values():
                if m["algbw_GBps"] is not None:
                    m["algbw_GBps"] *= ranks / (ranks - 1)
        redop = r.redop if (model is None or model.reduces) and r.redop is not None else "none"
        row = row_of(coll, r.size, r.count, r.label, redop, r.root, r.modes, ranks)
        row["backend"] = t.backend
        if many:
            row["test"] = i
        out.append(row)
    return out


def _test_info(t: Test, i: int, coll: str, ranks: Optional[int], how: str, scaled: bool) -> Dict[str, Any]:
    """The document's record of one table: what it is, how it was named and read."""
    hosts = [t.header.ranks[k] for k in sorted(t.header.ranks)]
    avg = t.average
    return {"test": i, "name": t.name or t.command, "collective": coll,
            "named_by": how, "line": t.line, "rows": len(t.rows),
            "hosts_complete": ranks is not None and len(t.header.ranks) == ranks,
            "ranks": ranks, "hosts": list(dict.fromkeys(hosts)),
            "algbw": "printed x (n-1)/n (before June 2020), read as size / time" if scaled else "size / time",
            "average_bus_bandwidth": None if avg is None or avg[0] is None else avg[0][0]}


def _average(tests: List[Test], shared: List[Tuple[List[Test], Optional[Num], int]],
             infos: List[Dict[str, Any]]) -> Optional[float]:
    """The log's one average: a shared line's over every table, or the one table's own."""
    average = None
    for group, value, line in shared:
        check_average([r for t in group for r in t.rows], value, line, f"the {len(group)} tables above it")
        if sum(1 for t in group if t.rows) == len(tests) and value is not None:
            average = value[0]
    if len(tests) == 1 and average is None:
        average = infos[0]["average_bus_bandwidth"]
    return average


def _command(ours: bool, info: Dict[str, Any]) -> str:
    if ours:
        return "mpibench (printed output)"
    first = info["name"] or info["collective"]
    return f"nccl-tests {first if first.endswith(('_perf', '_mpi')) else first + '_perf'}"


def parse_text(text: str, hint: Optional[str] = None, source: Optional[Path] = None) -> Dict[str, Any]:
    """Printed output (source: its path) -> results document with 'tests'; Unreadable with the line."""
    tests, shared = scan(text)
    if not tests:
        raise Unreadable("no table rows (size count type ...) under column names")
    rows: List[Dict[str, Any]] = []
    infos: List[Dict[str, Any]] = []
    for i, t in enumerate(tests, 1):
        _sizes_forward(t)
        coll, ranks, how = resolve(t, hint, source)
        model = REGISTRY.get(coll)
        scaled = model is not None and _scaled_algbw(model, t.rows, t.layout)
        if t.average is not None:
            check_average(t.rows, t.average[0], t.average[1], f"the table at line {t.line}")
        rows += _test_rows(t, i, len(tests) > 1, coll, ranks, scaled)
        infos.append(_test_info(t, i, coll, ranks, how, scaled))
    average = _average(tests, shared, infos)
    ranks = infos[0]["ranks"] if len({x["ranks"] for x in infos}) == 1 else None
    hosts = list(dict.fromkeys(h for x in infos for h in x["hosts"]))
    ours = any(t.ours for t in tests)
    doc = document(rows, hosts, ranks, _command(ours, infos[0]), None,
                   "read from " + ("mpibench's" if ours else "nccl-tests'") + " printed output")
    doc.update(tests=infos, average_bus_bandwidth=average)
    if doc.get("world") and not all(x["hosts_complete"] for x in infos):
        doc["world"]["hosts_complete"] = False       # a pasted tail of the rank lines
    if ours and doc.get("world"):
        doc["world"]["backend"] = rows[0]["backend"]
    return doc

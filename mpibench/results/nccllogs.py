"""nccl-tests' printed output as users keep it: every table layout since before 2.13,
with launcher prefixes, NCCL/libfabric noise, several tests per log, or a pasted tail.

The table is recognised by itself (its column-name header, the `# nThread ... minBytes`
line, the rank lines); the layout of a row comes from the column names above it. Each
test (one table) keeps its own rows, ranks and average. A test's collective comes from
the log (`# Collective test starting:`, mpibench's `# Collective:`), else from the
caller's hint (--collective), else from a `*_perf` command line in the log, else from
what its rows allow: the redop and root cells, size / (count x element size) (n for the
collectives whose size spans every rank) and busbw / algbw (nccl-tests' factor). The
same evidence gives the rank count where the rank lines are missing or cut; a named
collective its rows contradict, an average its rows contradict, or sizes that run
backwards (lines of two runs mixed) are refused with the line, never read as figures.

mpibench's own printed output (`# mpibench run:` then one `# Collective:` table per
collective and one average for them all) reads through the same path.
"""
import math
import re

from ..launch import faults
from ..measure.collectives import REGISTRY
from ..measure.dtypes import DTYPES
from .nccltests import Unreadable, collective_name, document, row_of

_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")         # mpirun --tag-output
_COLUMNS = re.compile(r"#\s*size\s+count\s+type\b")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_START = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_OURS = re.compile(r"#\s*Collective:\s*(\S+)")                # mpibench's table title
_NTHREAD = re.compile(r"#\s*nThread\s+\d+\s+nGpus\s+\d+\s+minBytes")
_SWEEP = re.compile(r"minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)")
_REDUCED = re.compile(r"#\s*Reducing maxBytes to\s+(\d+)")
_VERSION = re.compile(r"#\s*nccl-tests version")
_MPIBENCH = re.compile(r"#\s*mpibench [a-z_]+:")
_AVERAGE = re.compile(r"#\s*Avg bus bandwidth(\s+\S+)?\s*:\s*(\S+)")
_BACKEND = re.compile(r"#\s*backend (\w+), launcher")       # mpibench's header
_CONCLUDED = re.compile(r"#\s*Collective test concluded")
_COMMAND = re.compile(r"(?:^|[\s/])([a-z]+(?:_[a-z]+)*)_perf(?:_mpi)?(?:\s|$)")
_NUMBER = re.compile(r"^[-+]?(\d+)?(?:\.(\d*))?(?:[eE]([-+]?\d+))?$")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d$")
_SIGNS = re.compile(r"#\s*(?:nccl-tests version|Collective test starting:|nThread\s+\d+\s+nGpus"
                    r"|\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid|\s*size\s+count\s+type\b)")
_ELSIZE = {**{d.label: d.size for d in DTYPES.values()},
           "uint32": 4, "uint64": 8, "f8e4m3": 1, "f8e5m2": 1}
_LEAD = ("redop", "root")
_SPREAD = ["out", "in"]     # mpibench's "rank spread" columns, after all of nccl-tests' own
_CHECKED = ("time", "algbw", "busbw")


def looks_like_text(text):
    """Whether text holds nccl-tests' (or mpibench's) printed table or its header lines."""
    return _SIGNS.search(text) is not None


def number(token):
    """(value, half a unit of its last printed digit), or None for N/A; Unreadable if not
    a number."""
    if token in ("N/A", "n/a"):
        return None
    m = _NUMBER.match(token)
    if not m or not (m.group(1) or m.group(2)):
        raise Unreadable(f"{token!r} is not a number")
    decimals = len(m.group(2) or "")
    exponent = int(m.group(3) or 0)
    return float(token), 0.5 * 10.0 ** (exponent - decimals)


# ---- one pass over the lines: tests, their rows and averages ----
def _header():
    return {"ranks": {}, "name": None, "command": None, "used": False, "ours": False}


def _known(name):
    """Whether a *_perf program in a command line is one of nccl-tests' collectives."""
    return collective_name(name) in REGISTRY or name == "hypercube"


def _layout(line, n):
    """Column names -> (leading columns after type, [names of each mode's columns])."""
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
        if any(x not in g for x in _CHECKED) or len(g) < 4:
            raise Unreadable(f"line {n}: a mode's columns are {' '.join(g)}, expected time "
                             f"algbw busbw and #wrong or error")
    return lead, groups, 2 if spread else 0


def _mode(values, names):
    """One mode's cells -> mpibench's figures (with half units kept aside for checks)."""
    cells = dict(zip(names, values))
    time_us = cells["time"]
    if time_us is None or not time_us[0] > 0:
        raise Unreadable("a time is not above 0")
    out = {"time_us": time_us[0], "algbw_GBps": None if cells["algbw"] is None else cells["algbw"][0],
           "busbw_GBps": None if cells["busbw"] is None else cells["busbw"][0], "nwrong": None}
    if "#wrong" in cells and cells["#wrong"] is not None:
        wrong = cells["#wrong"][0]
        if wrong < 0 or wrong != int(wrong):
            raise Unreadable(f"#wrong {wrong:g} is not a count")
        out["nwrong"] = int(wrong)
    if "error" in cells and cells["error"] is not None:    # before 2.13: the largest error
        out["max_error"] = cells["error"][0]
    return out, (cells["algbw"], cells["busbw"])


def _row(tokens, layout, n):
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
    redop, root = None, -1
    for col in lead:
        if col == "redop":       # empty before 2.13 for collectives without one
            redop = rest.pop(0) if rest and not _NUMBER.match(rest[0]) and \
                rest[0] not in ("N/A", "n/a") else ""
        elif not rest or not re.fullmatch(r"-?\d+", rest[0]):
            raise Unreadable(f"line {n}: no root where the column names have one")
        else:
            root = int(rest.pop(0))
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
    return {"size": size, "count": count, "label": label, "redop": redop, "root": root,
            "modes": modes, "bws": bws, "line": n}


def _state():
    """A fresh reading: the header being read, the test whose rows follow, every test so
    far, the tests an average line will close (group), the averages shared by several
    tables, and mpibench's backend once its header names it."""
    return {"header": _header(), "test": None, "tests": [], "group": [], "shared": [],
            "backend": None}


def _next_header(state):
    """Starts a new header where the current one already has its table (mpibench's own
    header stands over all of its tables)."""
    if state["header"]["used"] and not state["header"]["ours"]:
        state["header"] = _header()


def scan(text):
    """The tests in text: [{name, command, ranks, ours, line, rows, average}], and the
    averages printed for several tables at once (mpibench's own output)."""
    state = _state()
    for n, raw in enumerate(text.splitlines(), 1):
        line = (_TAG.sub(" ", raw) if ">:" in raw else raw).strip()
        if not line:
            continue
        if line.startswith("#"):
            _comment_line(state, line, n)
        else:
            _plain_line(state, line, n)
    return [t for t in state["tests"] if t["rows"]], state["shared"]


def _plain_line(state, line, n):
    """A line outside the comments: a table row of the current test, or a command line
    naming a *_perf program (the next table's collective); anything else is noise."""
    tokens = line.split()
    if len(tokens) >= 5 and tokens[0].isdigit() and tokens[1].isdigit():
        _table_row(state, tokens, line, n)
        return
    m = _COMMAND.search(line) if "_perf" in line and "NCCL INFO" not in line else None
    if m and _known(m.group(1)):
        _next_header(state)
        state["header"]["command"] = m.group(1)


def _table_row(state, tokens, line, n):
    """Adds the row to the current test; Unreadable, with the line, where there is none
    or the row does not fit its column names."""
    test = state["test"]
    if test is None:
        raise Unreadable(f"line {n}: a table row with no column names above it "
                         f"(size count type ...)" if not state["tests"] else
                         f"line {n}: a table row after its test's average or "
                         f"end, with no column names above it")
    try:
        test["rows"].append(_row(tokens, test["layout"], n))
    except Unreadable as exc:
        raise Unreadable(str(exc) if str(exc).startswith("line ") else
                         f"line {n}: {exc}") from None
    except (ValueError, IndexError):
        raise Unreadable(f"line {n}: not a table row: {line[:60]!r}") from None


def _comment_line(state, line, n):
    """A '#' line: a rank line, an average, column names, a test's name, or the rest of
    a header (in that order: the first that matches decides)."""
    m = _RANK.match(line)
    if m:
        _rank_line(state, m, n)
        return
    m = _AVERAGE.match(line)
    if m:
        _average_line(state, m, n)
        return
    if _COLUMNS.match(line):
        _columns_line(state, line, n)
        return
    m = _START.match(line) or _OURS.match(line)
    if m:
        _next_header(state)
        state["header"]["name"], state["test"] = m.group(1), None
        return
    _header_line(state, line)


def _rank_line(state, m, n):
    """Records a rank's host in the header."""
    # rank lines come in a header, each rank once: one elsewhere means lines of two
    # runs mixed, and a rank count read from them would be wrong
    header = state["header"]
    rank = int(m.group(1))
    if header["used"] and not header["ours"] and _checking():
        raise Unreadable(f"line {n}: a rank line after its run's table, with no "
                         f"header (# nThread ...) before it")
    if rank in header["ranks"] and not header["ours"] and _checking():
        raise Unreadable(f"line {n}: rank {rank} listed twice in one header")
    header["ranks"][rank] = m.group(2)


def _average_line(state, m, n):
    """Gives the average to the one table above it, or keeps it as shared by the several
    tables above it; either way those tables end here."""
    group = state["group"]
    if m.group(1) is None:                  # "Avg bus bandwidth gloo": per backend
        value = number(m.group(2)) if _NUMBER.match(m.group(2)) else None  # n/a, nan
        if group and len(group) == 1:
            group[0]["average"] = (value, n)
        elif group:
            state["shared"].append((group, value, n))
    state["group"], state["test"] = [], None


def _columns_line(state, line, n):
    """Starts a test: its layout from the column names, its name and command from the
    header above."""
    header, backend = state["header"], state["backend"]
    layout = _layout(line, n)
    test = {"name": header["name"], "command": header["command"], "header": header,
            "layout": layout, "line": n, "rows": [], "average": None,
            "backend": backend or "nccl", "ours": header["ours"] or bool(backend)}
    header["used"], header["name"] = True, None
    state["test"] = test
    state["tests"].append(test)
    state["group"].append(test)


def _header_line(state, line):
    """The other header lines: mpibench's title and backend, nccl-tests' version and
    sweep (a new header), a reduced sweep, a test's end."""
    if _MPIBENCH.match(line):
        state["header"], state["test"], state["group"] = _header(), None, []
        state["header"]["ours"] = True
    elif _BACKEND.match(line):        # mpibench's, whatever its header looks like
        state["backend"] = _BACKEND.match(line).group(1)
    elif _VERSION.match(line) or _NTHREAD.match(line):
        _next_header(state)
        state["test"] = None
        m = _SWEEP.search(line)
        if m:
            state["header"]["sweep"] = [int(m.group(1)), int(m.group(2)), int(m.group(3)),
                                        m.group(4)]
    elif _REDUCED.match(line) and state["header"].get("sweep"):
        state["header"]["sweep"][1] = int(_REDUCED.match(line).group(1))
    elif _CONCLUDED.match(line):
        state["test"] = None


# ---- what each test is: collective and ranks ----
def _spreads(coll):
    """Whether the printed size is count x element size x n (else count x element size)."""
    c = coll.counts(3 * 64, 4, 3)
    return coll.bw_bytes(c, 4, 3) == 3 * c.param * 4


def _factor_shape(coll):
    """(a, varies): busbw factor a * (n-1)/n when varies, else the constant a."""
    f2, f3 = coll.busbw_factor(2), coll.busbw_factor(3)
    if f2 == f3:
        return f2, False
    return f2 * 2, True


def _ratio_bounds(rows):
    """[(lo, hi, line)] of busbw / algbw, as far as the printed digits allow."""
    out = []
    for r in rows:
        for alg, bus in r["bws"]:
            if alg is None or bus is None or alg[0] - alg[1] <= 0:
                continue
            out.append((max(0.0, bus[0] - bus[1]) / (alg[0] + alg[1]),
                        (bus[0] + bus[1]) / (alg[0] - alg[1]), r["line"]))
    return out


def _ks(rows):
    """size / (count x element size) of every row where that is defined."""
    out = []
    for r in rows:
        el = _ELSIZE.get(r["label"])
        if el and r["count"] > 0:
            out.append((r["size"] / (r["count"] * el), r["line"]))
    return out


def _pattern(coll, rows, layout):
    """Why the redop / root cells rule coll out, or None."""
    lead = layout[0]
    for r in rows:
        if "root" in lead and (r["root"] >= 0) != coll.rooted:
            return f"line {r['line']}: root {r['root']} (a {'' if coll.rooted else 'non-'}" \
                   f"rooted collective prints {'a rank' if coll.rooted else '-1'})"
        if "root" not in lead and coll.rooted:
            return "no root column"
        if r["redop"] in ("", "none") and coll.reduces:
            return f"line {r['line']}: no reduction op"
        if r["redop"] not in (None, "", "none") and not coll.reduces and coll.name != "sendrecv":
            return f"line {r['line']}: reduction op {r['redop']}"
        if r["redop"] is None and coll.reduces:
            return "no redop column"
    return None


def ranks_for(coll, rows, layout, lines):
    """(set of rank counts the rows allow, as an interval lo..hi, or None with the reason)."""
    why = _pattern(coll, rows, layout)
    if why:
        return None, why
    lo, hi = 1.0, math.inf
    if lines:
        top = max(lines) + 1
        if set(lines) == set(range(top)):
            lo = hi = top
        else:                                     # a pasted tail of the rank lines
            lo = top
    for k, at in _ks(rows):
        if _spreads(coll):
            if k != int(k) or not lo <= k <= hi:
                return None, f"line {at}: size / (count x element size) is {k:g}, not the " \
                             f"rank count" + (f" {int(lo)}" if lo == hi else "")
            lo = hi = k
        elif k != 1:
            return None, f"line {at}: size is {k:g} x count x element size, not 1 x"
    a, varies = _factor_shape(coll)
    for rlo, rhi, at in _ratio_bounds(rows):
        eps = 1e-9
        if not varies:
            if not rlo - eps <= a <= rhi + eps:
                return None, f"line {at}: busbw / algbw is {rlo:.4g}-{rhi:.4g}, not {a:g}"
            continue
        # a (n-1)/n in [rlo, rhi]  <=>  1/(1 - rlo/a) <= n <= 1/(1 - rhi/a)
        nlo = 1 / (1 - rlo / a) if rlo < a else math.inf
        nhi = 1 / (1 - rhi / a) if rhi < a else math.inf
        lo, hi = max(lo, nlo - eps), min(hi, nhi + eps)
        if lo == math.inf or (hi < math.inf and math.ceil(lo) > math.floor(hi)):
            return None, f"line {at}: busbw / algbw is {rlo:.4g}-{rhi:.4g}, which " \
                         f"{'' if a == 1 else format(a, 'g')}(n-1)/n gives for no rank count" + \
                         (f" n = {int(lo)} (its rank lines)" if lines and lo == hi else
                          " the other rows allow")
    return (math.ceil(lo), math.floor(hi) if hi < math.inf else None), None


def resolve(test, hint):
    """(collective, ranks or None, how the collective was known)."""
    rows, layout, lines = test["rows"], test["layout"], test["header"]["ranks"]
    first = rows[0]["line"]
    for name, how in ((test["name"], "the log"), (hint, "--collective"),
                      (test["command"], "the command line in the log")):
        if not name:
            continue
        coll = collective_name(name)
        if coll not in REGISTRY:
            if how == "the log":            # a test mpibench has no model of: read as printed
                return coll, _lines_only(lines), how
            if how == "--collective":
                raise Unreadable(f"--collective {name}: not a collective mpibench knows "
                                 f"({', '.join(REGISTRY)})")
            continue
        span, why = ranks_for(REGISTRY[coll], rows, layout, lines)
        if span is None:
            raise Unreadable(f"the table at line {test['line']} is not {coll} "
                             f"(named by {how}): {why}")
        return coll, _exact(span), how
    fits = {}
    for coll in REGISTRY.values():
        span, _ = ranks_for(coll, rows, layout, lines)
        if span is not None:
            fits[coll.name] = span
    if len(fits) == 1:
        (coll, span), = fits.items()
        return coll, _exact(span), "its rows (redop, root, size / count, busbw / algbw)"
    if not fits:
        raise Unreadable(f"line {first}: the rows fit no collective mpibench knows "
                         f"(redop, root, size / count and busbw / algbw)")
    raise Unreadable(f"line {first}: the log does not name the collective of this table, and "
                     f"its rows fit {', '.join(fits)}: give --collective NAME")


def _exact(span):
    lo, hi = span
    return lo if lo == hi else None


def _lines_only(lines):
    top = max(lines) + 1 if lines else None
    return top if lines and set(lines) == set(range(top)) else None


# ---- checks that keep mixed or cut logs from reading as figures ----
def _checking():
    """False only under the test fault switch trustlogs (see launch/faults.py)."""
    return faults.get("trustlogs", 0) is None


def _series(test):
    """The rows by (type, redop, root): nccl-tests sweeps the sizes once per type, op and
    root it was given (-d all, -o all, -r all)."""
    out = {}
    for r in test["rows"]:
        out.setdefault((r["label"], r["redop"], r["root"]), []).append(r)
    return out.values()


def _requested(sweep, limit=4096):
    """The sizes nccl-tests' header asks for (-b, -e, -f or -i), or None when it cannot say."""
    low, high, step, kind = sweep
    out, size = [], low
    while size <= high and len(out) <= limit:
        out.append(size)
        if (kind == "factor" and step < 2) or (kind == "bytes" and step < 1):
            break
        size = size * step if kind == "factor" else size + step
    return out if len(out) <= limit else None


def _sizes_forward(test):
    """Sizes grow along each series; where the header gives the sweep and the table ended
    (its average printed), each series has a row per size asked for, none larger."""
    if not _checking():
        return
    sweep = test["header"].get("sweep")
    wanted = _requested(sweep) if sweep and test["average"] is not None else None
    for rows in _series(test):
        last = None
        for r in rows:
            if last is not None and r["size"] < last["size"]:
                raise Unreadable(f"line {r['line']}: size {r['size']} after {last['size']} "
                                 f"(line {last['line']}): rows of two runs with no header "
                                 f"between them")
            last = r
        if wanted is None:
            continue
        if len(rows) != len(wanted) or any(r["size"] > w for r, w in zip(rows, wanted)):
            raise Unreadable(f"line {test['average'][1]}: the header asks for {len(wanted)} "
                             f"sizes ({wanted[0]} to {wanted[-1]} bytes), the table above has "
                             f"{len(rows)} rows of {rows[0]['label']}: rows are missing or "
                             f"come from another run")


def _busbw_cells(rows):
    return [bus for r in rows for _, bus in r["bws"] if bus is not None]


def check_average(rows, average, line, what):
    """The printed average must be the mean of the printed busbw (nccl-tests and mpibench
    both average every measured mode of every row), to the digits printed."""
    if average is None or not _checking():
        return
    cells = _busbw_cells(rows)
    if not cells:
        return
    lo = sum(b - h for b, h in cells) / len(cells)
    hi = sum(b + h for b, h in cells) / len(cells)
    value, half = average
    if not lo - half - 1e-9 <= value <= hi + half + 1e-9:
        raise Unreadable(f"line {line}: Avg bus bandwidth {value:g} is not the mean of the "
                         f"{len(cells)} busbw figures of {what} ({(lo + hi) / 2:.6g}): rows "
                         f"are missing or come from another test")


# ---- the document ----
def parse_text(text, hint=None):
    """Printed output -> results document with a 'tests' list (Unreadable with the line
    when it cannot be read right)."""
    tests, shared = scan(text)
    if not tests:
        raise Unreadable("no table rows (size count type ...) under column names")
    rows, infos, ours = [], [], False
    for i, t in enumerate(tests, 1):
        _sizes_forward(t)
        coll, ranks, how = resolve(t, hint)
        avg = t["average"]
        if avg is not None:
            check_average(t["rows"], avg[0], avg[1], f"the table at line {t['line']}")
        one_rank = ranks == 1
        model = REGISTRY.get(coll)
        for r in t["rows"]:
            redop = r["redop"] if model is None or model.reduces else "none"
            out = row_of(coll, r["size"], r["count"], r["label"],
                         redop if redop is not None else "none", r["root"], r["modes"])
            if one_rank:         # factor 0: busbw is not defined (nccl-tests prints 0)
                for m in r["modes"].values():
                    m["busbw_GBps"] = None
            out["backend"] = t["backend"]
            if len(tests) > 1:
                out["test"] = i
            rows.append(out)
        hosts = [t["header"]["ranks"][k] for k in sorted(t["header"]["ranks"])]
        ours |= t["ours"]
        infos.append({"test": i, "name": t["name"] or t["command"], "collective": coll,
                      "named_by": how, "line": t["line"], "rows": len(t["rows"]),
                      "hosts_complete": ranks is not None and len(t["header"]["ranks"]) == ranks,
                      "ranks": ranks, "hosts": list(dict.fromkeys(hosts)),
                      "average_bus_bandwidth": None if avg is None or avg[0] is None
                      else avg[0][0]})
    average = None
    for group, value, line in shared:
        check_average([r for t in group for r in t["rows"]], value, line,
                      f"the {len(group)} tables above it")
        if sum(1 for t in group if t["rows"]) == len(tests) and value is not None:
            average = value[0]
    if len(tests) == 1:
        average = infos[0]["average_bus_bandwidth"] if average is None else average
    sizes = {x["ranks"] for x in infos}
    ranks = sizes.pop() if len(sizes) == 1 else None
    hosts = list(dict.fromkeys(h for x in infos for h in x["hosts"]))
    first = infos[0]["name"] or infos[0]["collective"]
    command = "mpibench (printed output)" if ours else \
        f"nccl-tests {first if first.endswith(('_perf', '_mpi')) else first + '_perf'}"
    doc = document(rows, hosts, ranks, command, None,
                   "read from " + ("mpibench's" if ours else "nccl-tests'") + " printed output")
    doc["tests"] = infos
    if doc.get("world") and not all(x["hosts_complete"] for x in infos):
        doc["world"]["hosts_complete"] = False       # a pasted tail of the rank lines
    if ours and doc.get("world"):
        doc["world"]["backend"] = rows[0]["backend"]
    doc["average_bus_bandwidth"] = average
    return doc

"""nccl-tests' printed output as users published it (../shared/realworld/nccl-tests): every
log read by report (text and csv), compared, drawn and used as check's baseline, with the
figures written below as taken from each log by eye; mpibench's own printed output read
back with its JSON's figures; and a fuzz of cut, shuffled and prefixed lines that must
give one clear error or a correct read."""
import csv
import io
import json
import random
import re
from pathlib import Path
from typing import get_type_hints

import pytest

from conftest import ROOT, check_usage_error, lone, mpirun, show
from mpibench.errors import UsageError
from mpibench.results import document, nccltestslog, reader
from mpibench.measure.row import Figures, Row
from mpibench.results.schema import Document
from mpibench.results.tables import fnum
from mpibench.diagnose import checkjudge

LOGS = Path(ROOT).parent / "shared" / "realworld" / "nccl-tests"
pytestmark = pytest.mark.skipif(not LOGS.is_dir(), reason=f"{LOGS} is absent (the real "
                                "nccl-tests logs live beside the repository, never in it)")


def log(prefix):
    [path] = LOGS.glob(prefix + "_*.txt")
    return str(path)


# Per log: the --collective it needs (a log that does not name it and whose rows fit two),
# the rank count (None: unknown), the hosts, and per test its collective, row count and
# average; then a few rows: test, size, count, type, redop, root and each mode's time,
# algbw, busbw and #wrong (or error before 2.13), as printed. Stored as mpibench has it:
# alltoall is all_to_all; a redop cell that is empty, absent or nccl-tests' placeholder
# ("sum" of sendrecv) is "none" for a collective that does not reduce; a missing root
# is -1; busbw of one rank is not defined ("-": nccl-tests prints 0.00).
EXPECTED = {
    "01": dict(ranks=8, hosts=["localhost"],
               tests=[("all_to_all", 34, 58.6481)],
               rows=["1 0 0 float none -1 | 1.63 0.00 0.00 N/A | 1.38 0.00 0.00 N/A",
                     "1 512 16 float none -1 | 87.33 0.01 0.01 N/A | 88.47 0.01 0.01 N/A",
                     "1 524288 16384 float none -1 | 86.58 6.06 5.30 N/A | 89.33 5.87 5.14 N/A",
                     "1 8589934592 268435456 float none -1 | 33508 256.36 224.31 N/A | "
                     "33234 258.47 226.16 N/A"]),
    "02": dict(ranks=8, hosts=["localhost"], tests=[("broadcast", 34, 64.8653)],
               rows=["1 4 1 float none 0 | 33.96 0.00 0.00 N/A | 33.80 0.00 0.00 N/A",
                     "1 536870912 134217728 float none 0 | 2436.3 220.37 220.37 N/A | "
                     "2434.5 220.53 220.53 N/A"]),
    "03": dict(ranks=8, hosts=["localhost"], tests=[("reduce", 34, 65.018)],
               rows=["1 524288 131072 float sum 0 | 67.58 7.76 7.76 N/A | 66.57 7.88 7.88 N/A",
                     "1 536870912 134217728 float sum 0 | 2421.6 221.70 221.70 N/A | "
                     "2413.4 222.45 222.45 N/A"]),
    "04": dict(ranks=16, hosts=["test-nccl-worker-0", "test-nccl-worker-1"],
               tests=[("all_reduce", 32, 124.584)],
               rows=["1 8 2 float sum -1 | 85.70 0.00 0.00 0 | 74.97 0.00 0.00 0",
                     "1 4096 1024 float sum -1 | 81.02 0.05 0.09 0 | 80.44 0.05 0.10 0",
                     "1 17179869184 4294967296 float sum -1 | 66023 260.21 487.90 0 | "
                     "65990 260.34 488.14 0"]),
    "05": dict(ranks=1, hosts=["nid001597"], tests=[("all_reduce", 30, 0.0)],
               rows=["1 8 2 float sum -1 | 3.38 0.00 - 0 | 0.19 0.04 - 0",
                     "1 4294967296 1073741824 float sum -1 | 6465.1 664.33 - 0 | "
                     "0.18 23880830.11 - 0"]),
    "06": dict(ranks=10, hosts=[f"cnode3-{k:03d}" for k in range(2, 12)],
               tests=[("all_reduce", 10, 47.8165), ("all_gather", 10, 46.7949),
                      ("reduce_scatter", 10, 47.1335), ("all_to_all", 10, 43.6048),
                      ("sendrecv", 10, 24.7624)],
               rows=["1 33554432 4194304 double sum -1 | 1405.25 23.88 42.98 0 | "
                     "1406.35 23.86 42.95 0",
                     "2 17179869120 214748364 double none -1 | 321112 53.50 48.15 0 | "
                     "317424 54.12 48.71 0",
                     "3 17179869120 214748364 double sum -1 | 316586 54.27 48.84 0 | "
                     "317130 54.17 48.76 0",
                     "4 17179869120 214748364 double none -1 | 346210 49.62 44.66 0 | "
                     "345521 49.72 44.75 N/A",
                     "5 17179869184 2147483648 double none -1 | 691104 24.86 24.86 0 | "
                     "690729 24.87 24.87 N/A"]),
    "07": dict(ranks=16, hosts=["ztan-mig-235z", "ztan-mig-gq73"],
               tests=[("all_reduce", 31, 70.742)],
               rows=["1 4194304 1048576 float sum -1 | 364.6 11.50 21.57 0 | 356.6 11.76 22.05 0",
                     "1 8589934592 2147483648 float sum -1 | 47535 180.71 338.82 0 | "
                     "47743 179.92 337.35 0"]),
    "08": dict(ranks=8, hosts=["gpu-dp-2jvzl-pqq7p"], tests=[("reduce_scatter", 31, 110.971)],
               rows=["1 0 0 float sum -1 | 0.91 0.00 0.00 0 | 0.96 0.00 0.00 0",
                     "1 4194304 131072 float sum -1 | 44.95 93.32 81.65 0 | 43.01 97.52 85.33 0"]),
    "09": dict(ranks=8, hosts=["gpu-dp-2jvzl-pqq7p"], tests=[("all_gather", 31, 110.538)],
               rows=["1 4096 128 float none -1 | 38.09 0.11 0.09 0 | 37.23 0.11 0.10 0",
                     "1 8589934592 268435456 float none -1 | 20982.4 409.39 358.21 0 | "
                     "20651.5 415.95 363.95 0"]),
    "10": dict(ranks=72, hosts=["slurm-gb200-207-171"], tests=[("all_reduce", 5, 745.53)],
               rows=["1 536870912 134217728 float sum -1 | 1806.7 297.16 586.06 0 | "
                     "1835.9 292.43 576.74 0"]),
    "11": dict(ranks=1, hosts=["GENOA-01"], tests=[("all_to_all", 1, 0.0)],
               rows=["1 33554432 8388608 float none -1 | 19.56 1715.44 - 0 | "
                     "0.78 43046.10 - N/A"]),
    "12": dict(ranks=None, hosts=[], tests=[("all_reduce", 2, 4.32178)],
               rows=["1 268435456 67108864 float sum -1 | 122131 2.20 4.33 2e-06 | "
                     "122165 2.20 4.33 2e-06"]),
    "13": dict(ranks=64, hosts=[], tests=[("all_to_all", 2, 0.507636)],
               rows=["1 536870912 2097152 float none -1 | 1041974 0.52 0.51 0e+00 | "
                     "1041299 0.52 0.51 1e+00"]),
    "14": dict(ranks=None, hosts=[], tests=[("sendrecv", 1, None)],
               rows=["1 37748744 37748744 uint8 none -1 | 11732 3.22 3.22 0e+00 | "
                     "11698 3.23 3.23 3e+02"]),
    "15": dict(ranks=8, hosts=["nid003336", "nid003373"], tests=[("all_reduce", 30, 25.0537)],
               rows=["1 4096 1024 float sum -1 | 42.62 0.10 0.17 0 | 28.84 0.14 0.25 0",
                     "1 4294967296 1073741824 float sum -1 | 101166 42.45 74.30 0 | "
                     "101028 42.51 74.40 0"]),
    "16": dict(ranks=2, hosts=["cnode2-001", "cnode2-002"],
               tests=[("all_to_all", 10, 13.4689), ("sendrecv", 10, 13.5405)],
               rows=["1 33554432 2097152 double none -1 | 1282.93 26.15 13.08 0 | "
                     "1266.72 26.49 13.24 N/A",
                     "2 17179869184 2147483648 double none -1 | 1263724 13.59 13.59 0 | "
                     "1262569 13.61 13.61 N/A"]),
    "17": dict(ranks=16, hosts=["test-nccl-worker-0", "test-nccl-worker-1"],
               tests=[("all_reduce", 32, 124.343)],
               rows=["1 4194304 1048576 float sum -1 | 170.3 24.63 46.18 0 | 168.8 24.84 46.58 0"]),
    "18": dict(ranks=2, hosts=["lab"],
               tests=[("all_gather", 8, 1.27827), ("all_gather", 8, 0.669677),
                      ("all_gather", 8, 1.54607)],
               rows=["1 1048576 131072 float none -1 | 2189.16 0.48 0.24 0 | 2190.15 0.48 0.24 0",
                     "2 2097152 262144 float none -1 | 4535.01 0.46 0.23 0 | 4551.84 0.46 0.23 0",
                     "3 8388608 1048576 float none -1 | 2266.88 3.70 1.85 0 | "
                     "2264.54 3.70 1.85 0"]),
}
MODES = ("out_of_place", "in_place")


def _expected_rows(spec):
    """{(test, size, mode): (count, type, redop, root, time, algbw, busbw, #wrong, error)}."""
    out = {}
    for line in spec["rows"]:
        head, *modes = line.split("|")
        test, size, count, label, redop, root = head.split()
        for mode, cells in zip(MODES, modes):
            t, a, b, w = cells.split()
            wrong, err = ("", float(w)) if "e" in w else ("" if w == "N/A" else int(w), "")
            out[(int(test), int(size), mode)] = (int(count), label, redop, int(root), float(t),
                                                 float(a), "" if b == "-" else float(b), wrong, err)
    return out


@pytest.fixture(scope="module")
def reports(procs):
    """report's csv and text of every log: one run for the logs that name their collective
    (or whose rows decide it), one per --collective the others need."""
    out = {}
    groups = {}
    for key in EXPECTED:
        groups.setdefault(EXPECTED[key].get("hint"), []).append(key)
    for hint, keys in groups.items():
        args = (["--collective", hint] if hint else []) + [log(k) for k in keys]
        r = lone(["report", "--format", "csv", *args])
        assert r.returncode == 0, show(r)
        table = list(csv.DictReader(io.StringIO(r.stdout)))
        t = lone(["report", *args])
        assert t.returncode == 0, show(t)
        for k in keys:
            part = t.stdout.split(f"# {log(k)}: ", 1)[1]
            part = part.split("\n# " + str(LOGS), 1)[0]
            out[k] = ([x for x in table if x["file"] == log(k)], part)
    return out


def test_the_types_name_every_field_of_every_real_log():
    fields, figures = set(get_type_hints(Row)), set(get_type_hints(Figures))
    for path in sorted(LOGS.rglob("*.txt")):
        doc = reader.load(str(path))
        assert set(doc) <= set(get_type_hints(Document)), (path.name, set(doc))
        for row in doc["results"]:
            assert set(row) <= fields, (path.name, set(row) - fields)
            for m in (row[k] for k in ("out_of_place", "in_place") if row.get(k)):
                assert set(m) <= figures, (path.name, set(m) - figures)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_report_reads_every_real_log_with_its_figures(key, reports):
    spec, path = EXPECTED[key], log(key)
    several = len(spec["tests"]) > 1
    table, text = reports[key]
    # every row of every test, both modes, as many as the log has
    for n, (coll, count, _) in enumerate(spec["tests"], 1):
        mine = [x for x in table if x["test"] == (str(n) if several else "")]
        assert len(mine) == 2 * count, (key, n, len(mine))
        assert {x["collective"] for x in mine} == {coll}
    for (test, size, mode), want in _expected_rows(spec).items():
        got = next(x for x in table if x["test"] == (str(test) if several else "") and
                   int(x["size"]) == size and x["mode"] == mode)     # size 0: the first
        have = (int(got["count"]), got["type"], got["redop"], int(got["root"]),
                float(got["time_us"]), float(got["algbw_GBps"]),
                float(got["busbw_GBps"]) if got["busbw_GBps"] else "",
                int(got["nwrong"]) if got["nwrong"] else "",
                float(got["max_error"]) if got["max_error"] else "")
        assert have == want, (key, test, size, mode)
    # text: each test's own average, and the rank count or the word that it is unknown
    averages = re.findall(r"^# Avg bus bandwidth\s+: (\S+)", text, re.M)
    want = [format(a, "g") for _, _, a in spec["tests"] if a is not None]
    assert averages[:len(want)] == want, text
    first = text.splitlines()[0]
    if spec["ranks"] == 72:     # a pasted tail: one rank line of 72
        assert "72 ranks on 1+ hosts (the rank lines list some of them)" in first, first
    elif spec["ranks"] and not spec["hosts"]:
        assert f"{spec['ranks']} ranks (from the rows; no rank lines, hosts unknown)" in first
    elif spec["ranks"]:
        nh, n = len(spec["hosts"]), spec["ranks"]
        assert f"{n} rank{'s' if n != 1 else ''} on {nh} host{'s' if nh != 1 else ''}" \
            in first, first
    else:
        assert "ranks unknown" in first, first
    doc = reader.load(path, spec.get("hint"))
    assert doc["world"]["hosts"] == spec["hosts"] if spec["ranks"] else "world" not in doc
    assert [(t["collective"], t["rows"], t["average_bus_bandwidth"]) for t in doc["tests"]] == \
        spec["tests"]


@pytest.mark.parametrize("key", ["01", "13"])
@pytest.mark.usefixtures("procs")
def test_a_log_that_does_not_name_its_collective_says_which_fit(key, tmp_path):
    # the two old alltoall logs read by their file names (above); under a name that
    # names nothing, their rows fit two collectives and nothing else decides
    path = tmp_path / "nccl.log"
    path.write_text(Path(log(key)).read_text())
    check_usage_error(lone(["report", str(path)]),
                      "its rows fit all_gather, all_to_all: give --collective NAME", 30)
    assert [t["named_by"] for t in reader.load(log(key))["tests"]] == ["the file's name"]


def _same_reading(a, b):
    """Two documents with the same tests and rows (the figures as read)."""
    assert [(t["collective"], t["ranks"], t["rows"], t["average_bus_bandwidth"])
            for t in a["tests"]] == [(t["collective"], t["ranks"], t["rows"],
                                      t["average_bus_bandwidth"]) for t in b["tests"]]
    assert [_cells(r) for r in a["results"]] == [_cells(r) for r in b["results"]]


@pytest.mark.parametrize("label", [" {r}: ", "{r}: ", "[{r}] ", "node-{r}.cluster: "])
def test_launcher_labels_on_every_line_read_as_without(label, tmp_path):
    # srun -l (width of the largest task id, or none), hydra's -prepend-rank, pdsh/clush;
    # rank 0 prints the table, other ranks their NCCL lines
    for key in ("06", "07"):
        lines = Path(log(key)).read_text().splitlines()
        path = tmp_path / f"{key}.txt"
        path.write_text("".join(label.format(r=0 if "NCCL INFO" not in x else 3) + x + "\n"
                                for x in lines))
        _same_reading(reader.load(str(path)), reader.load(log(key)))


@pytest.mark.usefixtures("procs")
def test_in_place_wrong_na_on_every_row_names_alltoall(tmp_path):
    # log 06's alltoall table alone, its name and command gone: nccl-tests checks no
    # in-place alltoall, so that column is N/A on every row, which all_gather never prints
    lines = Path(log("06")).read_text().splitlines()
    part = [x for x in lines[111:146] if "Collective test starting" not in x]
    path = tmp_path / "run.txt"
    path.write_text("\n".join(part) + "\n")
    doc = reader.load(str(path))
    assert [(t["collective"], t["named_by"], t["rows"]) for t in doc["tests"]] == \
        [("all_to_all", "its rows and its in-place #wrong (N/A on every row)", 10)]
    # the same rows with a checked in-place column: all_gather fits as well
    path.write_text("\n".join(re.sub(r"N/A$", "0", x) for x in part) + "\n")
    check_usage_error(lone(["report", str(path)]),
                      "its rows fit all_gather, all_to_all: give --collective NAME", 30)


_BARE_LINES = re.compile(r"^#\s*(?=\s*(?:size\s+count|\(B\)|Out of bounds|Avg bus|out-of-place"
                         r"|nThread|Rank\s+\d|Using devices))")


def test_a_log_printed_without_its_hash_marks_reads_the_same(tmp_path):
    # published logs whose column names and summary lines lost their '#'
    for key in ("12", "02", "06"):
        path = tmp_path / f"{key}.txt"
        path.write_text("\n".join(_BARE_LINES.sub("", x) for x in
                                  Path(log(key)).read_text().splitlines()) + "\n")
        assert re.search(r"^Avg bus bandwidth", path.read_text(), re.M)
        _same_reading(reader.load(str(path)), reader.load(log(key)))


def test_all_gather_from_before_june_2020_reads_algbw_as_size_over_time(tmp_path):
    # nccl-tests before June 2020 printed all_gather's algbw x (n-1)/n and busbw = algbw,
    # under columns with no redop, root or #wrong (src/all_gather.cu, print_header). Log
    # 09's all_gather (8 ranks) written that way, without its '#' marks: algbw comes back
    # within the printed digits, busbw as printed.
    new = reader.load(log("09"))
    out = []
    for x in Path(log("09")).read_text().splitlines():
        t = x.split()
        if re.match(r"\s+\d+\s+\d+\s+float", x):
            out.append(f"{t[0]:>12} {t[1]:>12} {t[2]:>6}  {t[5]:>7} {t[7]:>6} {t[7]:>6}  0e+00"
                       f"  {t[9]:>7} {t[11]:>6} {t[11]:>6}  0e+00")
        elif re.match(r"#\s+size\s+count", x):
            out.append("       size        count   type     time  algbw  busbw  error"
                       "     time  algbw  busbw  error")
        elif not re.match(r"#\s+\(B\)|#.*out-of-place|# Collective test", x):
            out.append(_BARE_LINES.sub("", x))
    path = tmp_path / "old.txt"
    path.write_text("\n".join(out) + "\n")
    doc = reader.load(str(path))
    assert [(t["collective"], t["ranks"], t["algbw"]) for t in doc["tests"]] == \
        [("all_gather", 8, "printed x (n-1)/n (before June 2020), read as size / time")]
    for got, want in zip(doc["results"], new["results"]):
        for mode in ("out_of_place", "in_place"):
            g, w = got[mode], want[mode]
            assert g["busbw_GBps"] == w["busbw_GBps"]
            # half a printed digit of the old busbw x 8/7, and of the new algbw
            assert abs(g["algbw_GBps"] - w["algbw_GBps"]) <= 0.005 * (8 / 7 + 1) + 1e-9, (g, w)


def _interleave(a, b, at, step=1):
    """Log a's lines up to its row number at, then b's header, then a's and b's remaining
    lines alternating step at a time."""
    row = re.compile(r"(?:^|>:)\s*\d+\s+\d+\s+\w+\s")       # --tag-output or not
    cut = [i for i, x in enumerate(a) if row.search(x)][at]
    first = next(i for i, x in enumerate(b) if row.search(x))
    out, rest_a, rest_b = a[:cut] + b[:first], a[cut:], b[first:]
    while rest_a or rest_b:
        out += rest_a[:step] + rest_b[:step]
        rest_a, rest_b = rest_a[step:], rest_b[step:]
    return out


@pytest.mark.usefixtures("procs")
def test_two_runs_in_one_stream_read_both_or_are_refused_naming_both(tmp_path):
    a = Path(log("04")).read_text().splitlines()
    b = Path(log("17")).read_text().splitlines()
    path = tmp_path / "both.txt"
    # the same all_reduce sweep, the second run started while the first was at its 20th
    # row: every row fits one run's sweep only
    path.write_text("\n".join(_interleave(a, b, 20)) + "\n")
    doc = reader.load(str(path))
    one, two = reader.load(log("04")), reader.load(log("17"))
    assert [(t["collective"], t["rows"], t["average_bus_bandwidth"]) for t in doc["tests"]] \
        == [(t["collective"], t["rows"], t["average_bus_bandwidth"])
            for t in one["tests"] + two["tests"]]
    assert [_cells(r) for r in doc["results"] if r["test"] == 1] == \
        [_cells(r) for r in one["results"]]
    assert [_cells(r) for r in doc["results"] if r["test"] == 2] == \
        [_cells(r) for r in two["results"]]
    # started together: the rows of both are at the same place of the same sweep
    path.write_text("\n".join(_interleave(a, b, 0)) + "\n")
    r = lone(["report", str(path)])
    check_usage_error(r, "two runs wrote into this log at once (tables at line", 30)
    assert "and this row fits both: split the log by run" in r.stderr


@pytest.mark.usefixtures("procs")
def test_a_collective_the_rows_contradict_is_refused():
    # all_reduce rows: a reduction op, which all_gather has not; busbw / algbw = 1.97,
    # which sendrecv (1) never gives
    check_usage_error(lone(["report", "--collective", "all_gather", log("07")]),
                      "the table at line 22 is not all_gather (named by --collective): "
                      "line 24: reduction op sum", 30)
    check_usage_error(lone(["report", "--collective", "sendrecv", log("12")]),
                      "is not sendrecv (named by --collective): line 5: busbw / algbw is "
                      "1.961-1.975, not 1", 30)


@pytest.mark.usefixtures("procs")
def test_rows_mixed_from_two_tests_are_refused(tmp_path):
    text = Path(log("06")).read_text().splitlines()
    rows = [i for i, x in enumerate(text) if re.match(r"\s+\d+\s+\d+\s+double", x)]
    a, b = rows[12], rows[32]          # all_gather's 3rd row <-> alltoall's 3rd row
    text[a], text[b] = text[b], text[a]
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(text) + "\n")
    check_usage_error(lone(["report", str(path)]), "is not the mean of the 20 busbw figures", 30)


@pytest.mark.usefixtures("procs")
def test_a_row_cut_from_a_table_is_refused_by_the_sweep_its_header_asks_for(tmp_path):
    text = Path(log("09")).read_text().splitlines()
    row = next(i for i, x in enumerate(text) if x.split()[:1] == ["1048576"])
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(text[:row] + text[row + 1:]) + "\n")
    check_usage_error(lone(["report", str(path)]), "the header asks for 31 sizes (8 to "
                      "8589934592 bytes), the table above has 30 rows of float", 30)


def test_one_sweep_per_type_reads_as_one_test(tmp_path):
    # -d all: nccl-tests sweeps the sizes again for every type, in one table
    text = Path(log("18")).read_text().split("=== AllGather DEFAULT rep 2")[0].splitlines()
    rows = [x for x in text if re.match(r"\s+\d+\s+\d+\s+float", x)]
    at = text.index(rows[-1]) + 1
    text[at:at] = [x.replace("   float", "   int32") for x in rows]
    path = tmp_path / "dall.txt"
    path.write_text("\n".join(text) + "\n")
    doc = reader.load(str(path))
    assert [r["type"] for r in doc["results"]] == ["float"] * 8 + ["int32"] * 8
    assert doc["average_bus_bandwidth"] == 1.27827 and doc["world"]["size"] == 2


# ---- compare and plot: which test, which rows ----
@pytest.mark.usefixtures("procs")
def test_compare_two_logs_of_one_collective_says_what_it_drops():
    r = lone(["compare", log("04"), log("17")])
    assert r.returncode == 0, show(r)
    # 32 sizes x 2 modes; busbw printed 0.00 at 8-128 B in both logs (5 sizes x 2 modes)
    assert "42 within noise of 54 rows" in r.stdout or " of 54 rows" in r.stdout, show(r)
    for path in (log("04"), log("17")):
        assert f"# {path}: 10 row-modes not compared: its bandwidth is printed as 0.00 " \
               f"(below 0.005 GB/s) at 8 B, 16 B, 32 B, 64 B, 128 B" in r.stdout, show(r)
    # before 2.13 and after: the 256 and 512 MiB float all_reduce rows line up
    r = lone(["compare", log("12"), log("07")])
    assert r.returncode == 0, show(r)
    assert re.search(r"of 4 rows; geometric mean ratio", r.stdout), show(r)


@pytest.mark.usefixtures("procs")
def test_compare_and_plot_say_which_test_of_a_log_they_use(tmp_path):
    r = lone(["compare", log("18"), log("18")])
    assert r.returncode == 0, show(r)
    assert "tests 1, 2, 3 all hold all_gather: using test 1 (give --test N for another)" \
        in r.stdout and "16 within noise of 16 rows" in r.stdout, show(r)
    r = lone(["compare", "--test", "2", log("18"), log("09")])
    assert r.returncode == 0, show(r)
    assert f"# {log('18')}: test 2 (all_gather, line 53)" in r.stdout, show(r)
    # test 2's 1 MiB out-of-place busbw 0.12 against 09's 21.84
    assert re.search(r"all_gather .* 1 MiB\s+out-of-place\s+0\.12\s+21\.84\s+182\.000", r.stdout), \
        show(r)
    check_usage_error(lone(["compare", "--test", "4", log("18"), log("09")]),
                      "holds 3 tests", 30)
    pytest.importorskip("matplotlib")
    r = lone(["plot", log("18"), "--png", str(tmp_path / "p.png")])
    assert r.returncode == 0, show(r)
    assert "3 tests, each drawn as its own line" in r.stdout, show(r)


# ---- mpibench's own output and JSON against a log ----
@pytest.fixture(scope="module")
def own_run(procs, tmp_path_factory):
    """A real 2-rank run of all_to_all at 32 MiB of float64 (a size of log 16)."""
    folder = tmp_path_factory.mktemp("own")
    path = folder / "run.json"
    r = mpirun(2, ["run", "--collectives", "all_to_all", "-b", "32M", "-e", "32M", "-d",
                   "float64", "-n", "2", "-w", "1", "--json", str(path)], timeout=120)
    assert r.returncode == 0, show(r)
    printed = folder / "output.txt"
    printed.write_text(r.stdout)
    return path, printed


@pytest.mark.usefixtures("procs")
def test_compare_a_log_with_mpibench_json_of_the_same_collective(own_run):
    path, printed = own_run
    r = lone(["compare", log("16"), str(path)])
    assert r.returncode == 0, show(r)
    # alltoall meets all_to_all: log 16's 32 MiB out-of-place row (13.08 GB/s) against ours
    own = json.loads(path.read_text())["results"][0]["out_of_place"]["busbw_GBps"]
    assert re.search(rf"all_to_all\s+nccl/gloo\s+float64\s+none\s+32 MiB\s+out-of-place\s+"
                     rf"13\.08\s+{own:.4g}\s", r.stdout), show(r)
    assert "of 1 rows" in r.stdout, show(r)


def test_mpibench_printed_output_reads_back_with_its_json_figures(own_run):
    path, printed = own_run
    mine = json.loads(path.read_text())
    as_nccl = _as_nccl_tests_header(printed.read_text())
    for text in (printed.read_text(), as_nccl, re.sub(r"# mpibench \w+:.*\n", "", as_nccl)):
        doc = nccltestslog.parse_text(text)
        assert doc["world"]["size"] == 2 and doc["world"]["backend"] == "gloo"
        assert doc["average_bus_bandwidth"] == float("%g" % mine["average_bus_bandwidth"])
        assert len(doc["results"]) == len(mine["results"])
        for got, want in zip(doc["results"], mine["results"]):
            assert (got["collective"], got["size"], got["count"], got["dtype"]) == \
                (want["collective"], want["size"], want["count"], want["dtype"])
            for mode in MODES:
                if want[mode] is None:
                    assert got[mode] is None
                    continue
                for k, w in (("time_us", 7), ("algbw_GBps", 6), ("busbw_GBps", 6)):
                    assert got[mode][k] == float(fnum(want[mode][k], w)), (mode, k)


def _as_nccl_tests_header(text):
    """Today's output with nccl-tests' own test and rank lines (Group, test starting)."""
    text = re.sub(r"# Collective: (\w+)", r"# Collective test starting: \1_perf", text)
    return re.sub(r"#  Rank\s+(\d+) Pid", r"#  Rank \1 Group  0 Pid", text)


# ---- check --baseline ----
@pytest.mark.usefixtures("procs")
def test_check_judges_against_a_multi_host_all_reduce_log():
    # log 15: 8 ranks on 2 hosts; its 1 MiB row: out-of-place busbw 13.94, in-place 12.84
    r = mpirun(8, ["check", "-b", "1M", "-n", "1", "-w", "0", "--baseline", log("15")],
               timeout=240)
    assert r.returncode == 1, show(r)
    assert f"< 11.2 GB/s (0.8 x --baseline {log('15')})" in r.stdout, show(r)


def test_check_takes_one_test_of_a_log_of_five_as_baseline():
    # log 06: all_reduce is test 1 of 5, on 10 ranks, one per host; its 32 MiB row's
    # busbw is 42.98 out of place and 42.95 in place
    doc = reader.load(log("06"))
    found, skipped = checkjudge.baseline_limits(doc, log("06"), collective="all_reduce", size=1 << 25,
                                                  ranks_per_host=1, world=10, share=0.8)
    assert found == {"job": {"min_busbw_GBps": pytest.approx(0.8 * 42.98)}} and skipped is None


@pytest.mark.parametrize("key,collective,words", [
    ("12", "all_reduce", "its rank count is unknown"),
    ("18", "all_gather", "3 tests of all_gather in one log (tests 1, 2, 3)"),
    ("16", "all_to_all", "no all_to_all row at 1048576 bytes"),
])
def test_check_refuses_a_baseline_it_cannot_judge_by(key, collective, words):
    doc = reader.load(log(key), collective)
    with pytest.raises(UsageError, match=re.escape(words)):
        checkjudge.baseline_limits(doc, log(key), collective=collective, ranks_per_host=2, world=2,
                                     share=0.8, size=1 << 28 if key == "12" else 1 << 20)


# ---- fuzz: cut, shuffled and prefixed lines ----
TAG = "[1,0]<stdout>:"


def _mutate(lines, rng):
    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("cut", "truncate", "swap", "window", "prefix", "midrow"))
        i = rng.randrange(len(lines))
        if kind == "cut":
            del lines[i:i + rng.randint(1, 12)]
        elif kind == "truncate":
            lines = lines[:i + 1]
        elif kind == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "window":
            part = lines[i:i + rng.randint(2, 5)]
            rng.shuffle(part)
            lines[i:i + len(part)] = part
        elif kind == "prefix":
            for k in range(i, min(len(lines), i + 40)):
                lines[k] = TAG + lines[k]
        else:                              # a tag inside a line, as a row printed in parts
            spaces = [m.start() for m in re.finditer(r"\s", lines[i])] or [0]
            at = rng.choice(spaces)
            lines[i] = lines[i][:at] + TAG + lines[i][at:]
        if not lines:
            lines = ["#"]
    return lines


def _cells(r):
    return json.dumps([r["size"], r["count"], r["dtype"], r["redop"], r["root"],
                       r["out_of_place"], r["in_place"]], sort_keys=True)


def _rows_of(doc, t):
    return sorted(_cells(r) for r in doc["results"] if r.get("test", 1) == t["test"])


def _describes(avg, rows):
    """Whether avg is the mean busbw of rows to the digits printed (every busbw in these
    logs has 2 decimals; the average 6 digits): then a cut row leaves it true."""
    bws = [m["busbw_GBps"] for r in rows for m in (r["out_of_place"], r["in_place"])
           if m and m["busbw_GBps"] is not None]
    return bool(bws) and abs(sum(bws) / len(bws) - avg) <= 0.005 + 1e-5 * abs(avg)


def _truth(doc):
    """What a correct read may hold: rows of each collective; rank counts; each test's
    average with the whole of its rows (an average never stands over some of them)."""
    rows = {}
    for r in doc["results"]:
        rows.setdefault((r["collective"], r["size"], r["count"], r["dtype"]), []).append(
            (r["redop"], r["root"], r["out_of_place"], r["in_place"]))
    ranks = {(t["collective"], t["ranks"]) for t in doc["tests"]}
    averages = {}
    for t in doc["tests"]:
        averages.setdefault((t["collective"], t["average_bus_bandwidth"]), []).append(
            _rows_of(doc, t))
    whole = (doc["average_bus_bandwidth"], sorted(_cells(r) for r in doc["results"]))
    return rows, ranks, averages, whole


def fuzz(sources, seed=22, count=25):
    """(correct reads, one-line errors, wrong reads) of COUNT mutations of each source."""
    rng = random.Random(seed)
    reads, errors, wrong = 0, 0, []
    for text, hint, path in sources:
        lines = text.splitlines()
        rows, ranks, averages, whole = _truth(nccltestslog.parse_text(text, hint, path))
        for _ in range(count):
            mutated = _mutate(lines, rng)
            try:
                doc = document.validate(reader.parse_bytes("\n".join(mutated).encode(), hint, path))
            except document.Bad as exc:
                assert "\n" not in str(exc)
                errors += 1
                continue
            # a rank line cut away makes a log of fewer ranks to any reader: the count may
            # then differ; a row or an average never may
            cut_rank = len([x for x in mutated if "Rank" in x]) < \
                len([x for x in lines if "Rank" in x])
            bad = [("a row the log does not have", r) for r in doc["results"]
                   if (r["redop"], r["root"], r["out_of_place"], r["in_place"]) not in
                   rows.get((r["collective"], r["size"], r["count"], r["dtype"]), [])]
            for t in doc.get("tests", []):
                avg = t["average_bus_bandwidth"]
                mine = [r for r in doc["results"] if r.get("test", 1) == t["test"]]
                if avg is not None and _rows_of(doc, t) not in \
                        averages.get((t["collective"], avg), []) and not _describes(avg, mine):
                    bad.append(("an average over other rows than the log's", t))
                if t["ranks"] is not None and (t["collective"], t["ranks"]) not in ranks \
                        and not cut_rank:
                    bad.append(("a rank count the log does not have", t))
            several = len(doc.get("tests", [])) > 1
            avg = doc["average_bus_bandwidth"]
            if several and avg is not None and not _describes(avg, doc["results"]) and \
                    (avg, sorted(map(_cells, doc["results"]))) != whole:
                bad.append(("an average of every table over other rows", doc["average_bus_bandwidth"]))
            if bad:
                wrong.append(bad[0])
            else:
                reads += 1
    return reads, errors, wrong


def _sources(own_run):
    return [(Path(log(k)).read_text(), EXPECTED[k].get("hint"), log(k)) for k in sorted(EXPECTED)] + \
        [(own_run[1].read_text(), None, None)]


def test_fuzz_cut_shuffled_and_prefixed_lines_give_one_error_or_a_correct_read(own_run):
    reads, errors, wrong = fuzz(_sources(own_run))
    print(f"fuzz: {reads} correct reads, {errors} one-line errors")
    assert not wrong, wrong[:3]
    assert reads > 50 and errors > 50


def test_fuzz_catches_what_the_reader_would_get_wrong_without_its_checks(own_run, monkeypatch):
    monkeypatch.setenv("MPIBENCH_FAULT", "trustlogs:0")
    monkeypatch.setenv("MPIBENCH_TESTING", "1")
    reads, errors, wrong = fuzz(_sources(own_run))
    print(f"fuzz without the reader's checks: {len(wrong)} wrong reads of "
          f"{reads + errors + len(wrong)}")
    assert wrong

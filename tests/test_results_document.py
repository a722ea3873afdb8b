"""Every command that takes --json writes one results document: its file, from a real
2-rank mpirun, reads back through report, compare and plot (rows in run's shape)."""
import json
import re
from typing import get_type_hints

import pytest

from conftest import MPIRUN, PYTHON, lone, mpirun, show

from mpibench.measure.row import Figures, Row
from mpibench.results import document, reader, schema, tables

pytestmark = pytest.mark.timeout(300)

SHORT = {
    "run": ["run", "--collectives", "all_reduce,all_gather", "-b", "1K", "-e", "2K", "-n", "2",
            "-w", "0", "--probe-iters", "0"],
    "allreduce": ["allreduce", "-b", "64K", "-n", "2", "-w", "1"],
    "latency": ["latency", "-b", "64K", "-k", "4", "--warmup", "1"],
    "flagsync": ["flagsync", "-n", "10", "--warmup", "1"],
    "demo": ["demo"],
    "p2p": ["p2p", "--every-rank", "-b", "64K", "-n", "2", "-w", "0", "--latency-iters", "2"],
    "check": ["check", "-b", "64K", "-n", "2", "-w", "0"],
    "train": ["train", "--steps", "2", "--warmup", "0", "--alone-iters", "2"],
    "doctor": ["doctor"],
}
# rows each command writes: (collective, mode) in file order
ROWS = {
    "run": [("all_reduce", "in_place")] * 2 + [("all_gather", "both")] * 2,
    "allreduce": [("all_reduce", "in_place")],
    "latency": [("all_reduce", "in_place")] * 2,
    "flagsync": [("all_gather_object", "out_of_place"), ("all_gather", "out_of_place"),
                 ("all_reduce", "in_place")],
    "demo": [("all_reduce", "in_place"), ("reduce_scatter", "out_of_place"),
             ("all_gather", "out_of_place"), ("broadcast", "in_place")],
    "p2p": [("sendrecv", "out_of_place")] * 2,
    "check": [("all_reduce", "in_place")],
    "doctor": [],
}

SECTIONS = {"summary", "per_rank", "agree", "passed", "p2p", "links", "p2p_analysis", "check",
            "health", "train", "doctor", "verify", "settings", "swept", "launch"}


def written(command, tmp_path):
    path = tmp_path / f"{command}.json"
    done = mpirun(2, SHORT[command] + ["--backend", "gloo"] * (command not in ("doctor",))
                  + ["--json", str(path)], timeout=240)
    assert done.returncode == 0, show(done)
    return str(path), done


def measured(doc):
    return [(r, m) for r in doc["results"] for m in ("out_of_place", "in_place") if r[m]]


@pytest.mark.parametrize("command", list(SHORT))
@pytest.mark.usefixtures("procs")
def test_every_commands_json_reads_back(command, tmp_path):
    path, done = written(command, tmp_path)
    doc = reader.load(path)        # validated: the run row's shape
    assert doc["command"] == command and doc["complete"], doc
    if command in ROWS:
        got = [(r["collective"], "both" if r["out_of_place"] and r["in_place"] else
                "out_of_place" if r["out_of_place"] else "in_place") for r in doc["results"]]
        assert got == ROWS[command], got
    # The types name every field, but the commands' own sections (docs/results-document.md).
    assert set(doc) - set(get_type_hints(schema.Document)) <= SECTIONS, set(doc)
    assert all(set(row) <= set(get_type_hints(Row)) for row in doc["results"]), doc["results"]
    for row, mode in measured(doc):
        m = row[mode]
        assert set(m) <= set(get_type_hints(Figures)), m
        assert m["time_us"] > 0 and row["per_rank_time_us"][mode]
        if row.get("bw_bytes"):      # nccl-tests' algbw from the bytes and the time
            assert m["algbw_GBps"] == pytest.approx(row["bw_bytes"] / m["time_us"] / 1e3)
    report = lone(["report", path])
    assert report.returncode == 0, show(report)
    assert f"# {path}: {command}" in report.stdout, show(report)
    printed = [line.split()[:2] for line in report.stdout.splitlines()
               if re.match(r"\s+\d+\s+\d+\s", line)]
    if command != "train":
        assert printed == [[str(r["size"]), str(r["count"])] for r in doc["results"]], \
            show(report)
    compare = lone(["compare", path, path])
    assert compare.returncode == 0, show(compare)
    with_bw = [1 for r, m in measured(doc) if r[m]["algbw_GBps"]]
    if with_bw:
        assert f"0 faster, 0 slower, {len(with_bw)} within noise of {len(with_bw)} rows" \
            in compare.stdout, show(compare)
    else:
        assert "nothing to compare" in compare.stdout, show(compare)
    if with_bw:
        png = tmp_path / "p.png"
        plot = lone(["plot", path, "--png", str(png)])
        assert plot.returncode == 0 and png.stat().st_size > 0, show(plot)


@pytest.mark.usefixtures("procs")
def test_allreduce_trials_make_one_row_with_its_spread(tmp_path):
    path, done = written("allreduce", tmp_path)
    doc = json.loads(open(path).read())
    (row,) = doc["results"]
    assert len(row["trials"]) == 2 and doc["trials"] == 2
    times = sorted(t["in_place"]["time_us"] for t in row["trials"])
    sp = row["in_place"]["spread"]
    assert (sp["time_us_min"], sp["time_us_max"]) == (times[0], times[-1])
    report = lone(["report", path])
    assert "median of the trials per row" in report.stdout, show(report)


@pytest.mark.usefixtures("procs")
def test_run_comparison_of_two_backends_reads_back(tmp_path):
    path = tmp_path / "both.json"
    done = mpirun(2, SHORT["run"] + ["--backend", "gloo,mpi", "--json", str(path)], timeout=240)
    assert done.returncode == 0, show(done)
    report = lone(["report", str(path)])
    assert report.returncode == 0, show(report)
    # the comparison and the closing lines, as run printed them
    for line in done.stdout.splitlines():
        if line.startswith("#  all_") or "Avg bus bandwidth" in line or "Out of bounds" in line:
            assert line in report.stdout.splitlines(), line + "\n" + show(report)
    assert "# gloo vs mpi: busbw ratio mpi/gloo" in report.stdout


@pytest.mark.usefixtures("procs")
def test_sweep_json_reads_back(tmp_path):
    path = tmp_path / "sweep.json"
    root = ["--allow-run-as-root"] if __import__("os").geteuid() == 0 else []
    done = lone(["sweep", "--set", "MPIBENCH_UNUSED=1", "--json", str(path), "-q", "--", MPIRUN]
                + root + ["--oversubscribe", "-np", "2", PYTHON, "-m", "mpibench"]
                + SHORT["run"], timeout=240)
    assert done.returncode == 0, show(done)
    assert lone(["report", str(path)]).returncode == 0
    compare = lone(["compare", str(path), str(path)])
    assert compare.returncode == 0 and "within noise" in compare.stdout, show(compare)


# ---- printed output reads back: nccl-tests' reader takes what run printed ----

@pytest.mark.usefixtures("procs")
def test_printed_output_of_every_collective_reads_back(tmp_path):
    """What run prints (the sbatch scripts' output.txt) is nccl-tests 2.19.6's text: its
    reader finds every collective's rows with the JSON's figures, to the printed digits."""
    path = tmp_path / "run.json"
    done = mpirun(2, ["run", "--collectives", "all", "-b", "256K", "-e", "512K", "-n", "2",
                      "-w", "0", "--probe-iters", "0", "--json", str(path)], timeout=240)
    assert done.returncode == 0, show(done)
    text = tmp_path / "output.txt"
    text.write_text(done.stdout)
    printed, saved = reader.load(str(text)), json.loads(path.read_text())
    assert {r["collective"] for r in saved["results"]} == {
        "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
        "sendrecv", "gather", "scatter", "alltoallv"}
    assert len(printed["results"]) == len(saved["results"]), show(done)
    for p, s in zip(printed["results"], saved["results"]):
        assert [p[k] for k in ("collective", "size", "count", "type", "redop", "root")] == \
            [s[k] for k in ("collective", "size", "count", "type", "redop", "root")]
        for mode in ("out_of_place", "in_place"):
            assert (p.get(mode) is None) == (s[mode] is None), (p, s)
            if s[mode] is None:
                continue
            for field, width in (("time_us", 7), ("algbw_GBps", 6), ("busbw_GBps", 6)):
                # nccl-tests' reader takes a printed 0 busbw for "not defined"
                assert (p[mode][field] or 0.0) == float(tables.fnum(s[mode][field], width)), \
                    (field, p, s)
            assert p[mode]["nwrong"] == s[mode]["nwrong"] == 0
    assert printed["world"]["size"] == 2 and printed["world"]["hosts"] == saved["world"]["hosts"]
    assert printed["average_bus_bandwidth"] == pytest.approx(saved["average_bus_bandwidth"],
                                                             rel=1e-5)
    # the header lines nccl-tests' tools look for
    lines = done.stdout.splitlines()
    assert re.match(r"# mpibench version \S+ torch \S+ nccl-library=none$", lines[0]), lines[0]
    assert sum(line.startswith("# Collective test starting: ") for line in lines) == 10
    assert len([line for line in lines if re.match(r"#  Rank +\d+ Group +0 Pid +\d+ on ", line)]) == 2
    report = lone(["report", str(text)])
    assert report.returncode == 0, show(report)


@pytest.mark.usefixtures("procs")
def test_one_host_prints_no_host_table_and_only_flagged_ranks(tmp_path):
    path = tmp_path / "run.json"
    done = mpirun(2, ["run", "--collectives", "all_reduce,broadcast", "-b", "1K", "-e", "1K",
                      "-n", "2", "-w", "0", "--probe-iters", "3", "--json", str(path)])
    assert done.returncode == 0, show(done)
    doc = json.loads(path.read_text())
    assert len(doc["hosts"]) == 2          # the probe ran, and its figures are in the file
    assert " per host at " not in done.stdout and "slowest rank" not in done.stdout, show(done)
    flagged = sum(len(h["slow_ranks"]) for h in doc["hosts"] if h["symmetric"])
    assert done.stdout.count("# SLOW RANK ") == flagged, show(done)
    assert "line rate" not in done.stdout         # one host: no link between hosts


# ---- the results file: brought up to date in place, named as nccl-tests' -J names it ----

def test_results_file_writes_what_changed_and_never_overwrites(tmp_path, monkeypatch):
    """Pure logic beside the runs above: each new row writes itself and the few bytes after
    it (not the document again), the file parses as the document after every write, a
    change before the rows replaces it whole, and an existing name is kept (FILE.0, FILE.1,
    then CSV alike)."""
    from mpibench.results import files
    writes = []
    real = files._write_at
    monkeypatch.setattr(files, "_write_at",
                        lambda fd, data, offset: (writes.append(len(data)), real(fd, data, offset)))
    path = tmp_path / "r.json"
    path.write_text("keep\n")
    (tmp_path / "r.json.0").write_text("keep\n")
    f = files.ResultFile(str(path), files.json_parts)
    assert f.path == str(path) + ".1" and f.announcement() == f"# Writing JSON output to {f.path}"
    doc = document.new("run", ["-I", "1"])
    f.write(doc)
    for k in range(200):
        row = {"size": k, "per_rank": [k / 7] * 50, "host": "h\u00e9" if k == 3 else "h"}
        doc["results"].append(row)
        f.write(doc)
        assert json.loads(open(f.path).read()) == doc
        assert k == 0 or writes[-1] < len(json.dumps(row)) + 80, (k, writes[-1])
    assert sum(writes) < 1.2 * len(open(f.path, "rb").read())
    doc["results"][5]["size"] = -1          # changed in place: written when the document ends
    doc.update(end_time=document.now(), complete=True, notes=["x" * 100])
    f.write(doc)
    assert json.loads(open(f.path).read()) == doc
    doc["notes"] = []                      # a field before the rows: the file is replaced whole
    f.write(doc)
    assert json.loads(open(f.path).read()) == doc
    doc["exit"] = {"code": 0}               # the closing lines: written in place
    f.write(doc)
    assert json.loads(open(f.path).read()) == doc
    assert path.read_text() == (tmp_path / "r.json.0").read_text() == "keep\n"
    c = files.ResultFile(str(tmp_path / "r.json"), files.render_csv, "CSV")
    assert c.path == str(path) + ".2" and c.announcement().startswith("# Writing CSV output to ")
    c.write(doc)
    assert open(c.path).read().splitlines()[0].startswith("collective,backend,size")


@pytest.mark.usefixtures("procs")
def test_a_file_cut_inside_a_write_reads_its_rows_before_the_cut(tmp_path):
    """A kill inside a write leaves part of the new bytes over the old ones: the loader
    reads the rows before the cut, marks the document incomplete, and never reads the stale
    bytes after it; a real run's file, cut at every place of its last row's write."""
    out = tmp_path / "r.json"
    done = mpirun(2, ["run", "--collectives", "all_reduce", "-b", "1K", "-e", "8K", "-f", "2",
                      "-n", "2", "-w", "1", "--json", str(out)])
    assert done.returncode == 0, show(done)
    from mpibench.results import files
    doc = json.loads(out.read_text())
    rows = doc["results"]
    before = dict(doc, results=rows[:-1], end_time=None, complete=False)
    old = "".join(files.json_parts(before, cache=False)).encode()
    new = "".join(files.json_parts(doc, cache=False)).encode()
    at = next(k for k in range(len(old)) if old[k] != new[k])
    assert new[at:].startswith(b",\n  {")         # the append: the new row, then closing lines
    for cut in range(at, len(new), 3):
        text = new[:cut] + old[cut:]
        path = tmp_path / f"cut{cut}.json"
        path.write_bytes(text)
        got = reader.load(str(path))
        assert [r["size"] for r in got["results"]] in \
            ([r["size"] for r in rows[:-1]], [r["size"] for r in rows]), cut
        whole = text.startswith(new.rstrip(b" \n")) or text == new
        assert got["complete"] is False or whole, cut

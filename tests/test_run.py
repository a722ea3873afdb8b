"""`mpibench run` under a real mpirun on gloo (1 to 4 ranks), and the pure logic under it.

Every figure is checked against nccl-tests' definitions recomputed here from
FIELD-NOTES section 2 (sizes, counts, algbw, busbw factors), never from the engine's
own functions. Many checks share one mpirun job: each job costs seconds on a loaded
2-core machine, mostly `import torch`.
"""
import csv
import json
import os
import re
import socket
import statistics
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "launch"))
import fakecluster  # noqa: E402
from conftest import (MPIRUN, PYTHON, at_once, base_env, check_usage_error, lone,  # noqa: E402
                      mpibench_lines, mpirun, mpirun_killed, session_pids, show)

from mpibench.diagnose import stragglers  # noqa: E402
from mpibench.measure import sizes  # noqa: E402
from mpibench.measure.collectives import REGISTRY  # noqa: E402
from mpibench.results import tables  # noqa: E402
from mpibench.errors import UsageError  # noqa: E402

pytestmark = pytest.mark.timeout(300)

HOST = socket.gethostname()

# ---- nccl-tests' definitions, written out independently of mpibench ----

ELSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8,
          "int32": 4, "int64": 8, "int8": 1, "uint8": 1}
FLOATING = {"float32", "float16", "bfloat16", "float64"}
REDUCING = {"all_reduce", "reduce_scatter", "reduce"}
PER_RANK_CHUNKS = {"all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"}  # S: total over ranks
ROOTED = {"broadcast", "reduce", "gather", "scatter"}
# what torch.distributed can express: all_reduce/reduce work in place only,
# all_to_all/sendrecv out of place only
COLLECTIVES = list(REGISTRY)       # what each one is expected to do is written out below, apart
MODES = {"all_reduce": {"in_place"}, "reduce": {"in_place"},
         "all_to_all": {"out_of_place"}, "sendrecv": {"out_of_place"},
         "all_gather": {"out_of_place", "in_place"}, "reduce_scatter": {"out_of_place", "in_place"},
         "broadcast": {"out_of_place", "in_place"}, "gather": {"out_of_place", "in_place"},
         "scatter": {"out_of_place", "in_place"}, "alltoallv": {"out_of_place"}}


def test_every_collective_has_its_expectations():
    """A collective added to the registry needs its modes and bus factor written out here."""
    assert set(MODES) == set(COLLECTIVES) and PER_RANK_CHUNKS | ROOTED <= set(COLLECTIVES)


def busbw_factor(coll, n):
    if coll == "all_reduce":
        return 2 * (n - 1) / n
    if coll in PER_RANK_CHUNKS or coll == "alltoallv":
        return (n - 1) / n
    return 1.0          # broadcast, reduce, sendrecv


def nccl_counts(coll, size, el, n):
    """(count column, size column, S of algbw) for a requested size, as nccl-tests."""
    count = size // el
    if coll == "alltoallv":         # the generated pattern at spread 1 (alltoallv.cu's default)
        per = count // n
        per -= per % max(16 // el, 1)
        total = per * n * el
        # rank 0 sends rank j bytes in proportion to their distance j, 16-byte aligned
        peer = [int(j * total / (n * (n - 1) // 2)) // 16 * 16 for j in range(n)]
        moved = sum(b // el for b in peer) * el
        return per, moved, moved
    if coll in PER_RANK_CHUNKS:
        per = count // n
        per -= per % max(16 // el, 1)        # per-rank chunks rounded down, 16-byte aligned
        return per, per * n * el, per * n * el
    return count, count * el, count * el


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def row_lines(stdout):
    """The table rows nccl-tests-style: lines starting with spaces and a size."""
    return [line.split() for line in stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]


def mode_cells(fields):
    """{mode: [time, algbw, busbw, #wrong]} of a printed row; a mode torch lacks shows 'n/a'."""
    cells = fields[5:-2]            # the last two: each mode's rank spread
    if cells[0] == "n/a":
        return {"in_place": cells[1:5]}
    if len(cells) == 5:
        return {"out_of_place": cells[:4]}
    return {"out_of_place": cells[:4], "in_place": cells[4:8]}


def wrong_cells(fields):
    return [c[3] for c in mode_cells(fields).values()]


# ---- the matrix: every collective, dtype and op gloo does, both modes, checked ----

MATRIX = ["--collectives", "all", "-e", "1K", "-f", "64", "-d", "all", "-o", "all",
          "-n", "2", "-w", "0", "-c", "1", "--probe-iters", "2", "--per-rank"]
# 1 KiB everywhere; with 3 ranks (odd counts break naive splitting) 16 B too, where the
# per-rank chunks of all_gather, reduce_scatter and all_to_all round down to nothing
MATRIX_SIZES = {2: [1024], 3: [16, 1024], 4: [1024]}


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda n: f"np{n}")
def matrix(procs, request, tmp_path_factory):
    n = request.param
    d = tmp_path_factory.mktemp(f"matrix{n}")
    done = mpirun(n, MATRIX + ["-b", str(MATRIX_SIZES[n][0]), "--json", str(d / "run.json"),
                               "--csv", str(d / "run.csv")], timeout=280)
    assert done.returncode == 0, show(done)
    with open(d / "run.json") as f:
        doc = json.load(f)
    with open(d / "run.csv", newline="") as f:
        lines = list(csv.DictReader(f))
    return n, done, doc, lines


def test_matrix_every_check_passes(matrix):
    n, done, doc, _ = matrix
    assert "# Out of bounds values : 0 OK" in done.stdout, show(done)
    assert "FAILED" not in done.stdout + done.stderr, show(done)
    assert "Traceback" not in done.stderr, show(done)
    assert doc["complete"] is True and doc["out_of_bounds"] == {"count": 0, "okay": True}
    for row in doc["results"]:
        for mode in MODES[row["collective"]]:
            assert row[mode]["nwrong"] == 0, (row, mode)    # 0, not None: it was checked
    for fields in row_lines(done.stdout):
        assert wrong_cells(fields) in (["0"], ["0", "0"]), fields


def test_matrix_has_every_row(matrix):
    n, done, doc, _ = matrix
    want, skipped = set(), set()
    for coll in MODES:
        for dt, el in ELSIZE.items():
            ops = (["sum", "prod", "min", "max"] + (["avg"] if dt in FLOATING else [])
                   if coll in REDUCING else ["none"])
            for op in ops:
                for size in MATRIX_SIZES[n]:
                    if nccl_counts(coll, size, el, n)[0] == 0:
                        skipped.add((size, dt))
                    else:
                        want.add((coll, dt, op, size))
    got = [(r["collective"], r["dtype"], r["redop"], r["requested_size"]) for r in doc["results"]]
    assert len(got) == len(set(got)), "a row twice"
    assert set(got) == want
    # a size whose per-rank count rounds to zero is skipped with a note, not a crash
    for size, dt in skipped:
        assert f"# {size} B {dt}: skipped, less than one aligned element per rank for {n} ranks" \
            in done.stdout, (size, dt)
    # int avg is not for gloo: said once per collective, not run
    assert "# all_reduce int32 avg: skipped, gloo cannot average int32" in done.stdout


def test_matrix_figures_follow_nccl_tests(matrix):
    n, _, doc, _ = matrix
    for row in doc["results"]:
        coll, el = row["collective"], ELSIZE[row["dtype"]]
        count, size, s_bytes = nccl_counts(coll, row["requested_size"], el, n)
        assert (row["count"], row["size"], row["bw_bytes"]) == (count, size, s_bytes), row
        assert row["root"] == (0 if coll in ROOTED else -1), row
        factor = busbw_factor(coll, n)
        for mode in ("out_of_place", "in_place"):
            m = row[mode]
            if mode not in MODES[coll]:
                assert m is None and mode not in row["per_rank_time_us"], row
                continue
            times = row["per_rank_time_us"][mode]
            assert len(times) == n and all(t > 0 for t in times), row
            assert close(m["time_us"], statistics.mean(times)), row      # -a 1: mean over ranks
            assert close(m["algbw_GBps"], s_bytes / (m["time_us"] * 1e-6) / 1e9), row
            assert close(m["busbw_GBps"], m["algbw_GBps"] * factor), row


def test_matrix_odd_rank_counts(matrix):
    """1 KiB of float32 over 3 ranks: 256 // 3 = 85, aligned down to 84 -> 1008 bytes."""
    n, _, doc, _ = matrix
    if n != 3:
        pytest.skip("the 3-rank case")
    for coll in PER_RANK_CHUNKS:
        row = next(r for r in doc["results"] if r["collective"] == coll
                   and r["dtype"] == "float32" and r["requested_size"] == 1024)
        assert (row["count"], row["size"]) == (84, 1008), row


def test_matrix_printed_rows_match_json(matrix):
    n, done, doc, _ = matrix
    printed = row_lines(done.stdout)
    assert len(printed) == len(doc["results"])
    labels = {"float32": "float", "float16": "half", "bfloat16": "bfloat16", "float64": "double"}
    for fields, row in zip(printed, doc["results"]):
        assert fields[:5] == [str(row["size"]), str(row["count"]),
                              labels.get(row["dtype"], row["dtype"]), row["redop"],
                              str(row["root"])], (fields, row)


def test_matrix_csv_one_line_per_row_and_mode(matrix):
    n, _, doc, lines = matrix
    want = [(r, mode) for r in doc["results"] for mode in ("out_of_place", "in_place")
            if r[mode] is not None]
    assert len(lines) == len(want)
    for line, (row, mode) in zip(lines, want):
        assert (line["collective"], int(line["size"]), int(line["count"]), line["mode"]) == \
            (row["collective"], row["size"], row["count"], mode)
        assert close(float(line["time_us"]), row[mode]["time_us"])
        assert close(float(line["busbw_GBps"]), row[mode]["busbw_GBps"])
        assert int(line["nwrong"]) == 0


def test_matrix_per_host_and_per_rank(matrix):
    n, done, doc, _ = matrix
    assert [d["rank"] for d in doc["config"]["devices"]] == list(range(n))
    assert {d["hostname"] for d in doc["config"]["devices"]} == {HOST}
    assert [h["collective"] for h in doc["hosts"]] == COLLECTIVES
    for h in doc["hosts"]:
        assert [(x["host"], x["ranks"]) for x in h["hosts"]] == [(HOST, list(range(n)))]
        assert len(h["ranks"]) == n and h["iterations"] == 2
    # one host: no per-host table, and a rank named only when found consistently slow
    assert " per host at " not in done.stdout and "slowest rank" not in done.stdout
    assert done.stdout.count("# SLOW RANK ") == sum(len(h["slow_ranks"]) for h in doc["hosts"]
                                                    if h["symmetric"])
    assert "# per-rank time (us), host:rank" in done.stdout
    assert " ".join(f"{HOST}:{r}" for r in range(n)) in re.sub(r" +", " ", done.stdout)
    # every rank says what it held at its peak
    assert [m["rank"] for m in doc["memory"]] == list(range(n))
    assert all(m["peak_rss_bytes"] > m["buffer_bytes"] > 0 for m in doc["memory"])


@pytest.mark.usefixtures("hosts")
def test_per_host_table_names_the_hosts(tmp_path):
    """Two hosts (network namespaces), rank 0 on h1 and ranks 1, 2 on h2."""
    out = tmp_path / "hosts.json"
    with fakecluster.FakeCluster(hosts=2) as c:
        done = c.mpirun([PYTHON, "-m", "mpibench", "--collectives", "all_reduce,broadcast",
                         "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "--probe-iters", "3",
                         "--json", str(out)], ppn={"h1": 1, "h2": 2}, mpirun=MPIRUN,
                        env=base_env(), timeout=150)
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    assert [d["hostname"] for d in doc["config"]["devices"]] == ["h1", "h2", "h2"]
    for h in doc["hosts"]:
        assert [(x["host"], x["ranks"]) for x in h["hosts"]] == [("h1", [0]), ("h2", [1, 2])]
    host_rows = re.findall(r"^#  (h\d)\s+([\d,]+)\s+[\d.]+", done.stdout, re.M)
    assert host_rows == [("h1", "0"), ("h2", "1,2")] * 2, show(done)
    assert "2 hosts" in done.stdout
    assert done.stdout.count("# SLOW RANK ") == sum(len(h["slow_ranks"]) for h in doc["hosts"]
                                                    if h["symmetric"])
    # Two hosts: neither is named slow; one consistently slower is said to be, as a pair.
    assert "# SLOW HOST" not in done.stdout and all(not h["slow_hosts"] for h in doc["hosts"])
    assert done.stdout.count("with two hosts a relative threshold cannot say") == \
        sum(len(h["pairs"]) for h in doc["hosts"] if h["symmetric"])
    # every row's busbw against the hosts' line rate: namespace hosts report none (their
    # veths have no speed), so run says so; a saved file with rates shows each row's share
    rates = doc["line_rate_gbps"]
    assert set(rates) == {"h1", "h2"}, rates
    if not any(rates.values()):
        assert "# line rate: no host reports one" in done.stdout, show(done)
    rates = {"h1": 0.5, "h2": 2.0}
    doc["line_rate_gbps"] = rates
    out.write_text(json.dumps(doc))
    report = lone(["report", str(out)])
    assert "# busbw against the line rate: 0.5 Gbit/s, the slowest the hosts report (h1;" \
        in report.stdout, show(report)
    rate = min(rates.values())
    shares = re.findall(r"^#  (all_reduce|broadcast)\s+gloo\s+(\d+)\s+\S+\s+(\S+)\s+([\d.]+)"
                        r"\s+[\d.]+\s+(\d+)%$", report.stdout, re.M)
    measured = [(r["collective"], str(r["size"]), m.replace("_", "-"), r[m]["busbw_GBps"])
                for r in doc["results"] for m in ("out_of_place", "in_place") if r[m]]
    assert [s[:3] for s in shares] == [x[:3] for x in measured], show(report)
    for s, x in zip(shares, measured):
        assert abs(int(s[4]) - x[3] * 8 / rate * 100) <= 0.5 + 1e-9, (s, x, rate)


# ---- what the check counts: NaN, a poison clear of every result, avg it cannot judge ----

def test_poison_is_no_valid_output_and_avg_says_when_it_cannot_judge():
    import torch
    from mpibench.measure.collectives.base import (Ctx, count_wrong, exact_reason, poison_value,
                                                   reduce_result)
    from mpibench.measure.dtypes import DTYPES, OPS
    i = torch.arange(0, 60, dtype=torch.int64)
    for dt in DTYPES.values():
        poison = poison_value(dt)
        assert not 0 <= poison < dt.period, dt                    # no data value
        for op in OPS:
            for n in (1, 2, 3, 4, 5, 7, 8, 126):
                ctx = Ctx(rank=0, n=n, root=0, op=op, dtype=dt)
                if exact_reason(ctx) is None:
                    assert not (reduce_result(ctx, i) == poison).any(), (dt, op, n)
    bf16 = DTYPES["bfloat16"]
    assert exact_reason(Ctx(0, 7, 0, "avg", bf16)) is None
    for n in (8, 126):                        # (n + 2) eps is half the step 1/n or more
        assert "not less than half the step between results" in exact_reason(Ctx(0, n, 0, "avg", bf16))
    assert exact_reason(Ctx(0, 126, 0, "avg", DTYPES["float32"])) is None

    class Coll:
        def expected(self, ctx, start, stop):
            return reduce_result(ctx, torch.arange(start, stop))
    ctx = Ctx(0, 4, 0, "avg", DTYPES["float32"])
    got = reduce_result(ctx, torch.arange(0, 10)).float()
    assert count_wrong(Coll(), got, ctx) == 0
    got[3] = float("nan")
    got[5] += 0.25                            # a step of 1/n is wrong
    assert count_wrong(Coll(), got, ctx) == 2


@pytest.mark.usefixtures("procs")
def test_a_nan_in_an_avg_output_fails_the_check(tmp_path):
    """corrupt:1:nan writes NaN into rank 1's first output element: avg's check, which
    allows a rounding error, counts it all the same."""
    out = tmp_path / "nan.json"
    done = mpirun(2, ["--collectives", "all_reduce,reduce_scatter", "-o", "avg", "-d",
                      "float32,bfloat16", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0",
                      "--probe-iters", "0", "-c", "1", "--json", str(out)],
                  env={"MPIBENCH_FAULT": "corrupt:1:nan"})
    assert done.returncode == 1, show(done)
    rows = json.loads(out.read_text())["results"]
    wrong = [(r["collective"], r["dtype"], m, r[m]["nwrong"]) for r in rows
             for m in MODES[r["collective"]]]
    assert len(wrong) == 6 and all(w[3] == 1 for w in wrong), wrong


# ---- a corrupted output must fail the check; an existing file is never overwritten ----

@pytest.mark.usefixtures("procs")
def test_corrupt_output_fails_and_existing_json_is_kept(tmp_path):
    existing = tmp_path / "run.json"
    existing.write_text("keep me\n")
    done = mpirun(2, ["--collectives", "all_reduce,all_gather", "-b", "1K", "-e", "1K", "-n", "1",
                      "-w", "0", "--probe-iters", "0", "--json", str(existing)],
                  env={"MPIBENCH_FAULT": "corrupt:1"})
    assert done.returncode == 1, show(done)
    assert existing.read_text() == "keep me\n"
    numbered = tmp_path / "run.json.0"                # as nccl-tests' -J names it
    assert f"# Writing JSON output to {numbered}\n" in done.stdout, show(done)
    doc = json.loads(numbered.read_text())
    wrong = [row[m]["nwrong"] for row in doc["results"] for m in MODES[row["collective"]]]
    assert len(wrong) == 3 and all(w >= 1 for w in wrong), doc["results"]
    for fields in row_lines(done.stdout):          # the '#wrong' columns show it
        assert "0" not in wrong_cells(fields), show(done)
    assert re.search(r"# Out of bounds values : [1-9]\d* FAILED", done.stdout), show(done)
    failed = mpibench_lines(done.stderr)
    assert len(failed) == 1 and "FAILED" in failed[0], show(done)
    assert "Traceback" not in done.stderr, show(done)


# ---- --mode: every collective in one mode; one without that mode is said, not run ----

@pytest.mark.parametrize("mode", ["in_place", "out_of_place"])
@pytest.mark.usefixtures("procs")
def test_one_mode_every_collective(tmp_path, mode):
    """Every collective in one mode, the per-host probe in it too; the loop trace (test-only)
    shows that no timed loop ran on buffers of zeros (nccl-tests times initialized data)."""
    out = tmp_path / "mode.json"
    done = mpirun(3, ["--collectives", "all", "--mode", mode.split("_")[0], "-b", "1K", "-e",
                      "2K", "-n", "2", "-w", "1", "--probe-iters", "2", "--json", str(out)],
                  env={"MPIBENCH_TRACE_LOOPS": "1"}, timeout=200)
    assert done.returncode == 0, show(done)
    assert "Traceback" not in done.stderr, show(done)
    doc = json.loads(out.read_text())
    other = ({"in_place", "out_of_place"} - {mode}).pop()
    have = [c for c in COLLECTIVES if mode in MODES[c]]
    assert sorted({r["collective"] for r in doc["results"]}) == sorted(have), show(done)
    assert sorted(r["requested_size"] for r in doc["results"]) == sorted([1024, 2048] * len(have))
    for row in doc["results"]:
        assert row[other] is None and row[mode]["nwrong"] == 0, row
        assert list(row["per_rank_time_us"]) == [mode], row
    zeros = re.findall(r"^looptrace rank \d+: .*: views (\d+) all-zero (\d+)$", done.stderr, re.M)
    assert len(zeros) == 3 * len(doc["results"]), show(done)     # every rank, every loop
    assert all(int(v) > 0 and z == "0" for v, z in zeros), zeros
    assert sorted(h["collective"] for h in doc["hosts"]) == sorted(have), doc["hosts"]
    assert {h["mode"] for h in doc["hosts"]} == {mode.split("_")[0]}, doc["hosts"]
    # broadcast's out-of-place row is one in-place torch call: said in the header and JSON
    note = [n for n in doc.get("call_notes", []) if n["collective"] == "broadcast"]
    assert len(note) == (mode == "out_of_place"), doc.get("call_notes")
    assert ("# broadcast (gloo): out-of-place is one in-place call" in done.stdout) == \
        (mode == "out_of_place"), show(done)
    lacking = [c for c in COLLECTIVES if c not in have]
    text = mode.replace("_", "-")
    assert f"# {text}: n/a for {', '.join(lacking)} (torch.distributed" in done.stdout, show(done)
    for coll in lacking:
        assert f"# {coll}: skipped, no {text} call (torch.distributed has no such call)" \
            in done.stdout, show(done)


# ---- one rank: bus bandwidth is not defined, said so instead of a silent 0 ----

@pytest.mark.usefixtures("procs")
def test_one_rank_lone_python(tmp_path):
    out = tmp_path / "one.json"
    done = lone(["--collectives", "all_reduce,broadcast", "-b", "1K", "-e", "2K", "-n", "2",
                 "-w", "0", "--json", str(out)])
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    for row in doc["results"]:
        m = row["in_place"]
        if row["collective"] == "all_reduce":       # factor 2(n-1)/n = 0
            assert m["busbw_GBps"] is None and m["algbw_GBps"] > 0, row
        else:                                       # broadcast: factor 1 still
            assert close(m["busbw_GBps"], m["algbw_GBps"]), row
    for fields in row_lines(done.stdout):
        if fields[3] == "sum":                      # all_reduce: busbw n/a, algbw a number
            assert mode_cells(fields)["in_place"][1:3] != ["n/a", "n/a"], fields
            assert mode_cells(fields)["in_place"][2] == "n/a", fields


@pytest.mark.usefixtures("procs")
def test_one_rank_mpirun_says_busbw_not_defined():
    done = mpirun(1, ["--collectives", "all_reduce,all_gather", "-b", "1K", "-e", "1K", "-n", "2"])
    assert done.returncode == 0, show(done)
    assert "# Avg bus bandwidth    : n/a (bus bandwidth is not defined for one rank" in done.stdout
    printed = row_lines(done.stdout)
    assert len(printed) == 2, show(done)
    for fields in printed:                          # busbw of each mode present
        assert [c[2] for c in mode_cells(fields).values()] in (["n/a"], ["n/a", "n/a"]), fields


# ---- rows reach the disk as they are measured: a killed job keeps them ----

@pytest.mark.usefixtures("procs")
def test_killed_job_keeps_rows_seen(tmp_path):
    out = tmp_path / "killed.json"
    seen, sid = mpirun_killed(2, ["--collectives", "all_reduce", "-b", "8", "-e", "256M", "-n",
                                  "20", "-w", "1", "--probe-iters", "0", "--json", str(out)],
                              r"\s+\d+\s+\d+\s", 3)
    assert len(seen) == 3
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["end_time"] is None
    assert [str(r["size"]) for r in doc["results"][:3]] == [s[0] for s in seen]
    deadline = time.monotonic() + 15          # SIGKILL is not instant on a loaded machine
    while session_pids(sid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_pids(sid) == []


# ---- bad input: one line from rank 0, exit 2 on every rank, quickly, no traceback ----
# Idle machine: parse-time errors about 1 s, those that need the backend about 3-5 s;
# the bounds leave room for a loaded 2-core machine, a hang runs into them.

BAD = [
    (["-b", "4X"], "'4X' is not a size", 20),
    (["-b", "-1"], "'-1' is not a size", 20),
    (["-e", "0"], "'0' must be at least 1 byte", 20),
    (["-b", "1.5M"], "'1.5M' is not a size", 20),
    (["-b", "1M", "-e", "1K"], "--minbytes 1048576 is larger than --maxbytes 1024", 20),
    (["-f", "1"], "--stepfactor 1.0 must be above 1 (or give --stepbytes)", 20),
    (["-f", "0.5", "-e", "1K"], "--stepfactor 0.5 must be above 1", 20),
    (["--collectives", "allreduce"], "unknown collective 'allreduce'", 20),
    (["-d", "float33"], "unknown data type 'float33'", 20),
    (["-n", "0"], "-n/--iters: must be at least 1", 20),
    (["-d", "int32", "-o", "avg"], "all_reduce -d int32 -o avg: gloo cannot average int32", 60),
    (["-G", "1"], "-G/--cuda-graph needs CUDA GPUs", 60),
    (["-z", "4"], "argument -z/--blocking: invalid choice: 4 (choose from 0, 1, 2, 3)", 20),
    (["-z", "-1"], "argument -z/--blocking: invalid choice: -1", 20),
    (["-z", "3", "-G", "2"], "-z 3 cannot go with -G", 20),
    # nccl-tests warns and disables these (src/common.cu); mpibench refuses them
    (["-I", "2"], "-I 2: per-iteration timing is 0 (off) or 1 (on)", 20),
    (["-I", "1", "-G", "1"], "-I 1 cannot go with -G", 20),
    (["-K", "1"], "-K 1 needs -I 1", 20),
    (["-I", "1", "-n", "4", "-K", "4"], "-K 4: the per-iteration skip must be between 0 and 3", 20),
    (["-I", "1", "-K", "-1"], "-K -1: the per-iteration skip must be between 0 and 19", 20),
    (["--mode", "out"], "--mode out: gloo has no out-of-place call for all_reduce", 60),
    (["-r", "2"], "--root 2 is not a rank: the job has 2 ranks (0..1)", 60),
    (["--json", "/nonexistent-mpibench/x.json"], "/nonexistent-mpibench does not exist", 60),
    # /proc takes no new files, not even from root
    (["--json", "/proc/mpibench-test.json"], "cannot write /proc/mpibench-test.json", 60),
    (["--json", "/etc/hostname/x.json"], "/etc/hostname is not a folder", 60),
]


@pytest.fixture(scope="module")
def bad_runs(procs):
    """Every bad input, three jobs at a time (each mostly waits for `import torch`)."""
    def one(args):
        if "--collectives" not in args:
            args = ["--collectives", "all_reduce", "-e", "1K"] + args
        return mpirun(2, args, timeout=120)
    return at_once(one, [b[0] for b in BAD])


@pytest.mark.parametrize("case", range(len(BAD)), ids=[" ".join(b[0]) for b in BAD])
def test_bad_input(bad_runs, case):
    _, words, seconds = BAD[case]
    check_usage_error(bad_runs[case], words, seconds)


# ---- pure logic ----

@pytest.mark.parametrize("modes", [("out", "in"), ("in",)])
def test_call_notes_name_what_torch_does_differently(modes):
    """NCCL: broadcast's out-of-place row is one in-place call, gather and scatter copy the
    root's own chunk; gloo: the broadcast note alone; mpi: none."""
    from types import SimpleNamespace
    from mpibench.commands.run import call_notes
    from mpibench.measure.collectives import REGISTRY
    from mpibench.measure.engine import Plan
    plan = Plan(collectives=list(REGISTRY.values()), sizes=[8], dtypes=[], ops=[], modes=modes)
    backends = [SimpleNamespace(name=name, modes=lambda c: c.modes) for name in ("nccl", "gloo", "mpi")]
    got = [(b, c) for b, c, _ in call_notes(plan, backends)]
    out = "out" in modes
    assert got == [("nccl", "broadcast")] * out + [("nccl", "gather"), ("nccl", "scatter")] \
        + [("gloo", "broadcast")] * out
    assert all("copy_" in text for _, c, text in call_notes(plan, backends) if c != "broadcast")


@pytest.mark.parametrize("text, value", [("8", 8), ("64K", 65536), ("1M", 1 << 20), ("4G", 4 << 30),
                                         ("64k", 65536), ("2KiB", 2048), (" 16 ", 16)])
def test_parse_size(text, value):
    assert sizes.parse_size(text) == value


@pytest.mark.parametrize("text", ["4X", "-1", "0", "1.5M", "", "M", "1 M B x"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError):
        sizes.parse_size(text)


def test_sweep():
    assert sizes.sweep(8, 64, 2) == [8, 16, 32, 64]
    assert sizes.sweep(64, 64 << 10, 8) == [64, 512, 4096, 32768]
    assert sizes.sweep(100, 400, 2, stepbytes=100) == [100, 200, 300, 400]
    assert sizes.sweep(100, 400, 1, stepbytes=100) == [100, 200, 300, 400]   # factor unused
    assert sizes.sweep(1, 4, 1.5) == [1, 2, 3, 4]        # a fractional factor still advances
    assert sizes.sweep(8, 8) == [8]
    for bad in [(2, 1, 2), (8, 64, 1), (8, 64, 0.5)]:
        with pytest.raises(UsageError):
            sizes.sweep(*bad)
    with pytest.raises(UsageError):                      # a sweep nobody meant
        sizes.sweep(1, 1 << 30, stepbytes=1)


def _times(n, iters, base=1e-3):
    return [[base] * iters for _ in range(n)]


def test_stragglers_one_noisy_iteration_names_nobody():
    hosts = ["a", "a", "b", "b", "c", "c"]
    times = _times(6, 20)
    times[3][7] = 50e-3                       # one hiccup on one rank of host b
    out = stragglers.analyze(hosts, times)
    assert out["slow_hosts"] == [] and out["slow_ranks"] == []
    assert [(h["host"], h["ranks"]) for h in out["hosts"]] == \
        [("a", [0, 1]), ("b", [2, 3]), ("c", [4, 5])]


def test_stragglers_slow_host_and_rank_are_named():
    hosts = ["a", "a", "b", "b", "c", "c"]
    times = _times(6, 20)
    for k in range(20):
        times[5][k] = 1.6e-3 if k != 4 else 1e-3     # host c's rank 5: slow in 19 of 20
    out = stragglers.analyze(hosts, times, margin=0.2)
    assert out["slow_hosts"] == ["c"]
    assert out["slow_ranks"] == [5]
    assert out["slowest"]["rank"] == 5 and out["slowest"]["host"] == "c"
    c = next(h for h in out["hosts"] if h["host"] == "c")
    assert c["slow_iterations"] == 19 and c["max_s"] == pytest.approx(1.6e-3)
    assert c["ratio"] == pytest.approx(1.6)


def test_stragglers_two_hosts_name_neither_and_noise_hides_a_small_difference():
    times = _times(4, 10)
    for r in (2, 3):
        times[r] = [2e-3] * 10                   # host b twice as slow as host a
    out = stragglers.analyze(["a", "a", "b", "b"], times)
    # Two of anything is not a population: the median is their mean; b is reported as the
    # slower of the pair, and neither host nor rank is named slow.
    assert out["slow_hosts"] == [] and out["slow_ranks"] == []
    assert out["pairs"] == [{"what": "host", "slower": "b", "faster": "a",
                             "ratio": pytest.approx(2.0), "slow_iterations": 10}]
    out = stragglers.analyze(["a", "a", "b", "b"], _times(4, 10))
    assert out["slow_hosts"] == [] and out["slow_ranks"] == [] and out["pairs"] == []
    # Host d 1.3x the others in every iteration: named where its peers keep within 5%, not
    # where they themselves scatter by up to 1.5x the median in a third of the iterations.
    hosts = ["a", "b", "c", "d"]
    quiet = [[1e-3 * (1 + 0.05 * ((k + r) % 2)) for k in range(12)] for r in range(3)]
    noisy = [[1e-3 * (1.5 if (k + r) % 3 == 0 else 1.0) for k in range(12)] for r in range(3)]
    for peers, named in ((quiet, ["d"]), (noisy, [])):
        out = stragglers.analyze(hosts, peers + [[1.3e-3] * 12])
        assert out["slow_hosts"] == named and out["slow_ranks"] == [3] * len(named), out


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
REALWORLD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..",
                         "shared", "realworld", "nccl-tests")
_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")


def printed_figures(text):
    """(token, width) of every time (7 wide) and bandwidth (6 wide) in the table rows of
    nccl-tests' printed output (2.13 on: size count type redop root, then per mode time
    algbw busbw #wrong); launcher tags removed, even in mid-row."""
    out = []
    for line in _TAG.sub("", text).splitlines():
        f = line.split()
        if len(f) != 13 or not (f[0].isdigit() and f[1].isdigit()):
            continue
        out += [(f[i], 7 if i in (5, 9) else 6) for i in (5, 6, 7, 9, 10, 11) if f[i] != "N/A"]
    return out


def real_outputs():
    paths = [os.path.join(DATA, "nccl-tests-all_reduce_perf.txt")]
    if os.path.isdir(REALWORLD):
        paths += sorted(os.path.join(REALWORLD, n) for n in os.listdir(REALWORLD) if n.endswith(".txt"))
    # getFloatStr prints from 2.17 on, the first release to print its version line
    return [p for p in paths if "# nccl-tests version" in open(p, errors="replace").read()]


def test_fnum_prints_as_nccl_tests_printed():
    """tables.fnum against the figures real nccl-tests runs printed (getFloatStr): each
    printed figure, read as a number, prints again as the same text in the same width."""
    figures = [fig for path in real_outputs() for fig in printed_figures(open(path, errors="replace").read())]
    assert len(figures) >= 20, figures
    for token, width in figures:
        assert tables.fnum(float(token), width) == token.rjust(width), (token, width)
    if not os.path.isdir(REALWORLD):
        pytest.skip(f"only tests/data checked: {REALWORLD} (the real-world logs) is absent")


def test_fnum_width_and_rounding():
    for width in (6, 7):
        assert tables.fnum(None, width) == " " * (width - 3) + "n/a"
    # a value that rounds up takes fewer decimals and never overflows its column
    assert tables.fnum(999.996, 6) == "1000.0" and tables.fnum(9999.996, 7) == "10000.0"
    assert len(tables.fnum(1.5e9, 6)) == 6 and len(tables.fnum(1.5e9, 7)) == 7


# nccl-tests 2.19.6's computeIterStats (src/util.cu), written out: sorted times, p50 at
# n/2, pN at min(n-1, ceil(n*N/100)-1), population standard deviation.
@pytest.mark.parametrize("n", [1, 2, 5, 20, 100, 101])
def test_iter_stats_follow_nccl_tests(n):
    from mpibench.measure import iterstats
    times = [((k * 37) % n + 1) * 1e-6 for k in range(n)]      # 1..n us, shuffled
    s = sorted(times)

    def ceil(a, b):
        return -(-a // b)
    got = iterstats.stats(times)
    assert got["min"] == s[0] and got["max"] == s[-1] and got["p50"] == s[n // 2]
    assert got["p95"] == s[min(n - 1, ceil(n * 95, 100) - 1)]
    assert got["p99"] == s[min(n - 1, ceil(n * 99, 100) - 1)]
    assert got["avg"] == pytest.approx(statistics.fmean(times))
    assert got["stdev"] == pytest.approx(statistics.pstdev(times))


def test_iter_report_takes_the_slowest_rank_and_skips():
    from mpibench.measure import iterstats
    per_rank = [[5e-6, 1e-6, 2e-6, 9e-6], [3e-6, 4e-6, 1e-6, 1e-6]]
    r = iterstats.report(per_rank, 1)
    assert r["times_us"] == pytest.approx([5, 4, 2, 9])
    assert r["per_process_max_times_us"] == [pytest.approx([5, 1, 2, 9]), pytest.approx([3, 4, 1, 1])]
    assert r["skipped_iterations"] == 1
    assert (r["min_us"], r["max_us"], r["p50_us"]) == pytest.approx((2, 9, 4))
    assert r["avg_us"] == pytest.approx(5)
    assert r["cv_pct"] == pytest.approx(statistics.pstdev([4, 2, 9]) / 5 * 100)

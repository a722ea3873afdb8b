"""alltoallv as nccl-tests 2.19's alltoallv_perf defines it (src/alltoallv.cu): the generated
pattern from uniform to distance-weighted, a matrix file, nccl-tests' byte counts and busbw
from the busiest rank, the per-rank summary, every rank's received blocks checked; under a
real mpirun (gloo, 2-4 ranks) and across two namespace hosts; bad matrices refused with one
line; nccl-tests' own alltoallv log and -J JSON read back.

The expected figures are computed here from alltoallv.cu's formulas, written out again, not
from mpibench's functions."""
import json
import os
import re
import statistics
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "launch"))
import fakecluster  # noqa: E402
from conftest import (MPIRUN, PYTHON, ROOT, at_once, base_env, check_usage_error, lone,  # noqa: E402
                      mpibench_lines, mpirun, show)

from mpibench.measure.collectives import traffic  # noqa: E402
from mpibench.results import nccltestslog, nccltests, reader  # noqa: E402

pytestmark = pytest.mark.timeout(300)

DATA = os.path.join(ROOT, "tests", "data")
QUICK = ["--collectives", "alltoallv", "-n", "3", "-w", "1", "--probe-iters", "2", "--link-iters", "0"]


# ---- alltoallv.cu's formulas, written out independently ----

def peer_bytes(i, j, n, total, spread):
    """AlltoAllvGetPeerBytesDistanceWeighted: uniform blended with distance-weighted, 16-byte aligned."""
    if n == 1:
        return total // 16 * 16
    distance = (j - i + n) % n
    uniform = total / n
    weighted = distance * total / (n * (n - 1) / 2)
    return int((1.0 - spread) * uniform + spread * weighted) // 16 * 16


def generated(size, el, n, spread):
    """(count column, size column = S of algbw, [(sent, received) per rank]) of a requested size."""
    per = size // el // n
    per -= per % max(16 // el, 1)
    total = per * n * el
    ranks = [(sum(peer_bytes(r, j, n, total, spread) for j in range(n)),
              sum(peer_bytes(j, r, n, total, spread) for j in range(n))) for r in range(n)]
    most = max(sum(peer_bytes(r, j, n, total, spread) // el for j in range(n)) for r in range(n))
    return per, most * el, ranks


def from_matrix(m, el, n):
    m = [[v // 16 * 16 for v in row[:n]] for row in m[:n]]
    ranks = [(sum(m[r]), sum(m[j][r] for j in range(n))) for r in range(n)]
    most = max(max(sum(v // el for v in m[r]), sum(m[j][r] // el for j in range(n))) for r in range(n))
    return 0, most * el, ranks


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def assert_row(row, n, count, size, ranks):
    assert row["collective"] == "alltoallv" and row["in_place"] is None, row
    assert (row["count"], row["size"], row["bw_bytes"]) == (count, size, size), row
    assert row["per_rank_bytes"] == {"send": [s for s, _ in ranks], "recv": [r for _, r in ranks]}, row
    m = row["out_of_place"]
    assert m["nwrong"] == 0, row
    times = row["per_rank_time_us"]["out_of_place"]
    assert close(m["time_us"], statistics.mean(times)), row
    assert close(m["algbw_GBps"], size / (m["time_us"] * 1e-6) / 1e9), row
    assert close(m["busbw_GBps"], m["algbw_GBps"] * (n - 1) / n), row


def summary_lines(stdout):
    return re.findall(r"^#   rank=(\d+) host=\S+ send_bytes=(\d+) recv_bytes=(\d+) alg_bw=([\d.]+) "
                      r"bus_bw=([\d.]+) rank_time_usec=([\d.]+)$", stdout, re.M)


# ---- pure logic ----

@pytest.mark.parametrize("n", [2, 3, 4, 7])
@pytest.mark.parametrize("spread", [0.0, 0.5, 1.0])
def test_generated_pattern_is_alltoallv_cu_s(n, spread):
    t = traffic.Traffic(spread=spread)
    total = 4096 * n
    want = [[peer_bytes(i, j, n, total, spread) for j in range(n)] for i in range(n)]
    assert [t.sends(i, n, total) for i in range(n)] == want
    # every rank sends and receives the same total, whatever the spread
    sent = {sum(row) for row in want}
    received = {sum(want[i][j] for i in range(n)) for j in range(n)}
    assert len(sent) == 1 and sent == received
    if spread == 0.0:
        assert all(b == total // n // 16 * 16 for row in want for b in row)
    if spread == 1.0:
        assert all(want[i][i] == 0 for i in range(n))        # none to itself


def test_spread_example_of_alltoallv_cu():
    """The header's picture: rank 0 to 4 ranks, spread 1: none, ##, ####, ######."""
    t = traffic.Traffic(spread=1.0)
    assert t.sends(0, 4, 6 * 1024) == [0, 1024, 2048, 3072]


def test_matrix_is_read_as_alltoallv_cu_reads_it():
    m = traffic.parse_matrix("100 200 150\n50 100 75\n\n300 150 200\n", "m.txt")
    assert m == ((96, 192, 144), (48, 96, 64), (288, 144, 192))      # aligned down to 16
    assert traffic.parse_matrix("1e3 0\n0 2.5e2\n", "m", scale=2.0) == ((2000, 0), (0, 496))
    # a larger matrix: its first n rows and columns (nccl-tests: dimension >= ranks)
    assert traffic.fit(m, 2, "m") == ((96, 192), (48, 96))


@pytest.mark.parametrize("text,words", [
    ("1 2 3\n4 5 6\n", "must be square"),
    ("1 2\n3 4 5\n", "line 2 has 3 values"),
    ("1 -2\n3 4\n", "is negative"),
    ("1 x\n3 4\n", "'x' is not a number"),
    ("1 nan\n3 4\n", "is not a number"),
    ("\n\n", "empty"),
    ("1e400 0\n0 0\n", "too large"),
])
def test_bad_matrices_say_where(text, words):
    with pytest.raises(traffic.BadMatrix, match=re.escape(words)):
        traffic.parse_matrix(text, "m.txt")


def test_too_small_a_matrix_for_the_ranks():
    with pytest.raises(traffic.BadMatrix, match="a 2x2 matrix for 3 ranks"):
        traffic.fit(((0, 16), (16, 0)), 3, "m.txt")


@pytest.mark.parametrize("text", ["-0.1", "1.5", "x"])
def test_spread_outside_0_1_is_refused(text):
    with pytest.raises(traffic.BadMatrix):
        traffic.spread_value(text, "--alltoallv-spread")


def test_variables_are_honoured_and_options_win():
    env = {traffic.SPREAD_ENV: "0.25"}
    assert traffic.from_settings(None, None, None, None, 4, env).spread == 0.25
    assert traffic.from_settings("0.75", None, None, None, 4, env).spread == 0.75
    t = traffic.from_settings(None, "0 32\n32 0\n", "m.txt", None, 2, {traffic.SCALE_ENV: "2"})
    assert t.matrix == ((0, 64), (64, 0)) and t.scale == 2.0


# ---- nccl-tests' own alltoallv output, read back ----

def test_nccl_tests_alltoallv_log_reads_back():
    text = open(os.path.join(DATA, "nccl-tests-alltoallv_perf.txt")).read()
    doc = nccltestslog.parse_text(text)
    assert doc["tests"][0]["collective"] == "alltoallv" and doc["world"]["size"] == 4
    rows = doc["results"]
    assert [(r["count"], r["size"]) for r in rows] == [generated(s, 4, 4, 1.0)[:2] for s in
                                                        (1 << 20, 2 << 20, 4 << 20)]
    assert all(r["in_place"]["nwrong"] is None and r["out_of_place"]["nwrong"] == 0 for r in rows)
    assert doc["average_bus_bandwidth"] == 15.83


def test_nccl_tests_alltoallv_log_with_its_summary_reads_back():
    """NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1 prints each mode's per-rank lines inside the row."""
    text = open(os.path.join(DATA, "nccl-tests-alltoallv_perf-matrix.txt")).read()
    doc = nccltestslog.parse_text(text)
    (row,) = doc["results"]
    assert (row["collective"], row["size"], row["count"]) == ("alltoallv", 1081344, 0)
    assert row["out_of_place"]["time_us"] == 88.40 and row["out_of_place"]["busbw_GBps"] == 9.17
    assert row["in_place"]["time_us"] == 87.90 and row["in_place"]["nwrong"] is None
    assert doc["world"]["size"] == 4


def test_nccl_tests_alltoallv_json_reads_back():
    doc = json.load(open(os.path.join(DATA, "nccl-tests-alltoallv_perf.json")))
    assert nccltests.looks_like_json(doc)
    out = nccltests.parse_json(doc)
    assert {r["collective"] for r in out["results"]} == {"alltoallv"}
    assert [r["count"] for r in out["results"]] == [65536, 131072, 262144]


# ---- under a real mpirun: uniform, spread 0.5, a matrix; checked; the summary ----

@pytest.fixture(scope="module")
def runs(procs, tmp_path_factory):
    """Three jobs at once: uniform through nccl-tests' variable (4 ranks), spread 0.5 by
    option (3 ranks), a matrix file (3 ranks; larger than the job, as nccl-tests allows)."""
    d = tmp_path_factory.mktemp("a2av")
    matrix = [[0, 4096, 65536, 7], [1024, 0, 512, 9], [32768, 16, 0, 1], [1, 2, 3, 4]]
    (d / "m.txt").write_text("\n".join(" ".join(map(str, r)) for r in matrix) + "\n")
    jobs = [
        (4, QUICK + ["-b", "1K", "-e", "64K", "-f", "8", "--json", str(d / "u.json")],
         {traffic.SPREAD_ENV: "0"}),
        (3, QUICK + ["-b", "4K", "-e", "256K", "-f", "8", "-d", "float32,int8,float64",
                     "--alltoallv-spread", "0.5", "--json", str(d / "s.json")], {}),
        (3, QUICK + ["-b", "128K", "-e", "128K", "--alltoallv-matrix", str(d / "m.txt"),
                     "--json", str(d / "m.json")], {}),
    ]
    done = at_once(lambda j: mpirun(j[0], j[1], env=j[2], timeout=200), jobs)
    docs = []
    for (n, _, _), r, name in zip(jobs, done, "usm"):
        assert r.returncode == 0, show(r)
        docs.append((n, r, json.loads((d / f"{name}.json").read_text())))
    return docs, matrix, d


@pytest.mark.parametrize("which,spread", [(0, 0.0), (1, 0.5)])
def test_generated_rows_follow_nccl_tests(runs, which, spread):
    n, done, doc = runs[0][which]
    rows = doc["results"]
    assert rows and "# Out of bounds values : 0 OK" in done.stdout, show(done)
    el = {"float32": 4, "int8": 1, "float64": 8}
    for row in rows:
        count, size, ranks = generated(row["requested_size"], el[row["dtype"]], n, spread)
        assert_row(row, n, count, size, ranks)
    assert doc["alltoallv"]["mode"] == "generated" and doc["alltoallv"]["spread"] == spread
    assert f"# alltoallv traffic: generated pattern, spread {spread:g}" in done.stdout, show(done)
    # the per-rank summary under every row: bytes, and bandwidth at the row's time
    lines = summary_lines(done.stdout)
    assert len(lines) == n * len(rows), show(done)
    for k, row in enumerate(rows):
        for r, sent, got, alg, bus, _ in lines[k * n:(k + 1) * n]:
            assert (int(sent), int(got)) == (row["per_rank_bytes"]["send"][int(r)],
                                             row["per_rank_bytes"]["recv"][int(r)])
            want = max(int(sent), int(got)) / (row["out_of_place"]["time_us"] * 1e-6) / 1e9
            assert abs(float(alg) - want) <= 0.005 + 1e-9 and abs(float(bus) - want * (n - 1) / n) <= 0.006


def test_matrix_rows_follow_the_matrix(runs):
    docs, matrix, _ = runs
    n, done, doc = docs[2]
    (row,) = doc["results"]
    count, size, ranks = from_matrix(matrix, 4, n)
    assert_row(row, n, count, size, ranks)
    assert doc["alltoallv"]["mode"] == "matrix" and doc["alltoallv"]["matrix_dim"] == 4
    assert "its first 3 rows and columns used" in done.stdout, show(done)
    # ranks load unequally: their times name no slow host
    assert [h["symmetric"] for h in doc["hosts"]] == [False]
    assert len(summary_lines(done.stdout)) == n


def test_the_printed_log_and_json_read_back(runs):
    docs, _, d = runs
    for name, (_, done, doc) in zip("usm", docs):
        (d / f"{name}.log").write_text(done.stdout)
        printed = reader.load(str(d / f"{name}.log"))
        assert [(r["collective"], r["size"], r["count"]) for r in printed["results"]] == \
            [(r["collective"], r["size"], r["count"]) for r in doc["results"]]
    report = lone(["report", str(d / "m.json")])
    assert report.returncode == 0 and "alltoallv" in report.stdout, show(report)


def test_nccl_tests_json_of_a_run_reads_back(procs, tmp_path):
    out = tmp_path / "j.json"
    done = mpirun(2, QUICK + ["-b", "1K", "-e", "4K", "-J", str(out)])
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    back = nccltests.parse_json(doc)
    assert [r["size"] for r in back["results"]] == [generated(s, 4, 2, 1.0)[1] for s in (1024, 2048, 4096)]
    assert {r["collective"] for r in back["results"]} == {"alltoallv"}


def test_a_planted_wrong_element_is_counted(procs, tmp_path):
    out = tmp_path / "c.json"
    done = mpirun(3, QUICK + ["-b", "4K", "-e", "4K", "--alltoallv-spread", "0.5", "--json", str(out)],
                  env={"MPIBENCH_FAULT": "corrupt:2"})
    assert done.returncode == 1, show(done)
    (row,) = json.loads(out.read_text())["results"]
    assert row["out_of_place"]["nwrong"] == 1 and row["per_rank_nwrong"]["out_of_place"] == [0, 0, 1], row
    assert "FAILED" in " ".join(mpibench_lines(done.stderr)), show(done)


# ---- bad matrices and options: one line, exit 2 ----

def _bad_cases(d):
    files = {"notsquare": "1 2 3\n4 5 6\n", "ragged": "0 16\n16 0 16\n", "small": "0 16\n16 0\n",
             "negative": "0 16 -16\n16 0 16\n16 16 0\n", "word": "0 16 x\n16 0 16\n16 16 0\n",
             "huge": "0 1e15 0\n0 0 1e15\n1e15 0 0\n", "fine": "0 16 32\n16 0 16\n16 16 0\n"}
    for name, text in files.items():
        (d / f"{name}.txt").write_text(text)
    m = lambda name, *more: QUICK + ["--alltoallv-matrix", str(d / f"{name}.txt"), *more]  # noqa: E731
    return [
        (m("notsquare", "-b", "1K", "-e", "1K"), "must be square"),
        (m("ragged", "-b", "1K", "-e", "1K"), "line 2 has 3 values"),
        (m("small", "-b", "1K", "-e", "1K"), "a 2x2 matrix for 3 ranks"),
        (m("negative", "-b", "1K", "-e", "1K"), "is negative"),
        (m("word", "-b", "1K", "-e", "1K"), "'x' is not a number"),
        (m("huge", "-b", "1000T", "-e", "1000T"), "more than the"),
        (m("fine", "-b", "16", "-e", "16"), "-e 16 is below the 48 bytes"),
        (m("fine", "-b", "1K", "-e", "2K"), "give -b and -e the same size"),
        (m("missing", "-b", "1K", "-e", "1K"), "cannot read --alltoallv-matrix"),
        (QUICK + ["--alltoallv-spread", "2"], "the spread lies between 0.0"),
        (QUICK + ["--alltoallv-scale", "2"], "--alltoallv-scale scales a matrix"),
        (["--collectives", "all_reduce", "--alltoallv-spread", "0.5"], "add alltoallv to --collectives"),
    ]


def test_bad_matrices_get_one_line_and_exit_2(procs, tmp_path):
    cases = _bad_cases(tmp_path)
    done = at_once(lambda c: mpirun(3, c[0], timeout=90), cases)
    for (_, words), r in zip(cases, done):
        check_usage_error(r, words, 60)


def test_a_bad_matrix_named_by_nccl_tests_variable(procs, tmp_path):
    (tmp_path / "bad.txt").write_text("0 16\n16\n")
    done = mpirun(2, QUICK + ["-b", "1K", "-e", "1K"],
                  env={traffic.MATRIX_ENV: str(tmp_path / "bad.txt")})
    check_usage_error(done, f"{traffic.MATRIX_ENV} {tmp_path / 'bad.txt'}: line 2 has 1 values", 60)


# ---- across two namespace hosts ----

@pytest.mark.usefixtures("hosts")
def test_alltoallv_across_two_hosts(tmp_path):
    out = tmp_path / "hosts.json"
    (tmp_path / "m.txt").write_text("0 8192 1024\n512 0 16384\n4096 256 0\n")
    with fakecluster.FakeCluster(hosts=2) as c:
        done = c.mpirun([PYTHON, "-m", "mpibench", *QUICK, "-b", "64K", "-e", "64K",
                         "--alltoallv-matrix", str(tmp_path / "m.txt"), "--json", str(out)],
                        ppn={"h1": 1, "h2": 2}, mpirun=MPIRUN, env=base_env(), timeout=150)
    assert done.returncode == 0, show(done)
    doc = json.loads(out.read_text())
    assert [d["hostname"] for d in doc["config"]["devices"]] == ["h1", "h2", "h2"]
    (row,) = doc["results"]
    count, size, ranks = from_matrix([[0, 8192, 1024], [512, 0, 16384], [4096, 256, 0]], 4, 3)
    assert_row(row, 3, count, size, ranks)
    hosts = re.findall(r"^#   rank=(\d) host=(h\d) ", done.stdout, re.M)
    assert hosts == [("0", "h1"), ("1", "h2"), ("2", "h2")], show(done)

"""allreduce, latency, flagsync and demo under a real mpirun, on gloo and on MPI itself."""
import json
import re

import pytest

from conftest import at_once, lone, mpibench_lines, mpirun, show
from mpibench.measure.dtypes import DTYPES

pytestmark = pytest.mark.usefixtures("procs")

BACKENDS = ("gloo", "mpi")
RANKS = (2, 3)


def run_json(tmp_path, np, args, **kw):
    path = tmp_path / "out.json"
    done = mpirun(np, list(args) + ["--json", str(path)], **kw)
    assert done.returncode == 0, show(done)
    return done, json.loads(path.read_text())


def table_rows(text, first):
    """Rows of a tabulate table whose first header cell is `first`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [first]) + 2
    rows = []
    for line in lines[start:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("np", RANKS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_allreduce(tmp_path, np, backend):
    done, doc = run_json(tmp_path, np, ["allreduce", "--backend", backend, "-b", "256K",
                                        "-n", "3", "-w", "1"])
    out = done.stdout
    trials = re.findall(r"^trial (\d+): time ([\d.]+) ms  algbw ([\d.]+) GBps \(([\d.]+) Gbps\)  "
                        r"busbw ([\d.]+) GBps \(([\d.]+) Gbps\)", out, re.M)
    assert [t[0] for t in trials] == ["1", "2", "3"], show(done)
    factor = 2 * (np - 1) / np
    for _, _, alg, alg_b, bus, bus_b in trials:
        alg, bus = float(alg), float(bus)
        assert alg > 0 and bus > 0
        assert bus == pytest.approx(alg * factor, rel=0.01, abs=0.002)
        assert float(alg_b) == pytest.approx(alg * 8, rel=0.01, abs=0.01)
        assert float(bus_b) == pytest.approx(bus * 8, rel=0.01, abs=0.01)
    (row,) = doc["results"]      # one row: the trials' median, every trial kept
    assert row["backend"] == backend and row["size"] == 256 << 10 and len(row["trials"]) == 3
    for t in row["trials"]:   # nccl-tests' -a 1: the mean time over ranks, algbw = size / time
        per_rank = t["per_rank_time_us"]["in_place"]
        assert len(per_rank) == np and min(per_rank) > 0
        m = t["in_place"]
        assert m["time_us"] == pytest.approx(sum(per_rank) / np, rel=1e-9)
        assert m["algbw_GBps"] == pytest.approx(row["size"] / (m["time_us"] * 1e-6) / 1e9, rel=1e-9)
    # The slowest rank is the one with the largest mean time, and it is named with its host.
    means = doc["summary"]["per_rank_mean_time_us"]
    slow = doc["summary"]["slowest_rank"]
    assert slow["rank"] == means.index(max(means))
    assert f"slowest rank: {slow['rank']} on host {slow['host']}" in out
    assert len(doc["config"]["devices"]) == np and doc["versions"] and "env" in doc
    stats = doc["summary"]["algbw_GBps"]
    assert stats["min"] <= stats["mean"] <= stats["max"]


@pytest.mark.parametrize("np", RANKS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_latency(tmp_path, np, backend):
    done, doc = run_json(tmp_path, np, ["latency", "--backend", backend, "-b", "256K",
                                        "-k", "16", "--warmup", "1"])
    rows = table_rows(done.stdout, "host:local_rank")
    assert len(rows) == np, show(done)
    labels = {f"{d['hostname']}:{d['local_rank']}" for d in doc["config"]["devices"]}
    for label, _rank, d1, alg1, bus1, dk, algk, busk, ratio in rows:
        assert label in labels
        d1, dk, ratio = float(d1), float(dk), float(ratio)
        assert min(d1, dk, float(alg1), float(bus1), float(algk), float(busk)) > 0
        # The ratio is the two durations shown, to the precision shown.
        assert ratio == pytest.approx(dk / d1, rel=0.002, abs=0.006), show(done)
    for row in doc["per_rank"]:
        assert row["ratio"] == pytest.approx(row["many"]["time_us"] / row["one"]["time_us"])
        assert row["one"]["bytes"] == 256 << 10 and row["many"]["bytes"] == 16 * (16 << 10)
    many, one = doc["results"]      # per call, sizes rising: S/K K times, S once
    assert (one["size"], one["calls"], many["size"], many["calls"]) == (256 << 10, 1, 16 << 10, 16)
    assert many["in_place"]["time_us"] == pytest.approx(
        sum(r["many"]["time_us"] for r in doc["per_rank"]) / np / 16)
    # What it printed reads back as nccl-tests output, with the JSON's sizes and times.
    printed = tmp_path / "printed.txt"
    printed.write_text(done.stdout)
    rep = lone(["report", str(printed)])
    assert rep.returncode == 0, show(rep)
    back = [line.split() for line in rep.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]
    assert [int(c[0]) for c in back] == [16 << 10, 256 << 10], show(rep)
    for cells, row in zip(back, (many, one)):
        assert float(cells[cells.index("N/A") - 3]) == pytest.approx(
            row["in_place"]["time_us"], rel=0.01, abs=0.01), show(rep)


@pytest.mark.parametrize("np", RANKS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_flagsync(tmp_path, np, backend):
    done, doc = run_json(tmp_path, np, ["flagsync", "--backend", backend, "-n", "50",
                                        "--warmup", "2"])
    rows = doc["results"]
    assert [r["method"] for r in rows] == ["all_gather_object", "all_gather", "all_reduce"]
    expected = np * (np + 1) // 2
    for r in rows:
        assert r["sums"] == [expected] * np and r["agrees"]
        assert r["time_per_call_us"] > 0
        assert r["speedup_vs_all_gather_object"] == pytest.approx(
            rows[0]["time_per_call_us"] / r["time_per_call_us"])
    table = table_rows(done.stdout, "method")
    assert [t[0] for t in table] == ["all_gather_object", "all_gather", "all_reduce"]
    assert all(t[5] == str(expected) and t[6] == "yes" for t in table), show(done)
    assert f"the flags sum to {expected} on every rank" in done.stdout


@pytest.mark.parametrize("np", RANKS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_demo_passes(tmp_path, np, backend):
    done, doc = run_json(tmp_path, np, ["demo", "--backend", backend])
    total = np * (np - 1) // 2
    expected = {"all_reduce": str(total), "reduce_scatter": str(total),
                "all_gather": "[" + ", ".join(map(str, range(np))) + "]", "broadcast": str(np)}
    for coll, value in expected.items():
        assert f"{coll}: expected {value} on every rank: PASS" in done.stdout, show(done)
    rows = table_rows(done.stdout, "rank")     # the all_reduce table, in rank order
    assert [int(r[0]) for r in rows] == list(range(np))
    assert [r[2] for r in rows] == [str(r) for r in range(np)]
    assert all(r[-1] == "PASS" for r in rows)
    assert all(res["pass"] for res in doc["results"]) and doc["passed"] is True


@pytest.mark.parametrize("backend", BACKENDS)
def test_demo_fails_on_a_corrupted_rank(tmp_path, backend):
    """corrupt:2 (the engine's switch) leaves the poison value in the first element of
    every call of rank 2 whose output is read: each collective fails there, and there only."""
    done = mpirun(3, ["demo", "--backend", backend], env={"MPIBENCH_FAULT": "corrupt:2"})
    assert done.returncode == 1, show(done)
    poison = str(-DTYPES["int64"].exact)
    for coll in ("all_reduce", "reduce_scatter", "broadcast"):
        assert f"{coll}: expected 3 on every rank: FAIL" in done.stdout
    assert re.search(rf"^2 +\S+ +2 +{poison} +FAIL$", done.stdout, re.M), show(done)
    assert re.search(rf"^2 +\S+ +2 +\[{poison}, 1, 2\] +FAIL$", done.stdout, re.M), show(done)
    assert len(re.findall(r"^[01] +\S+ .* PASS$", done.stdout, re.M)) == 8, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and "demo FAILED: all_reduce" in lines[0]
    assert "(first: all_reduce on rank 2" in lines[0]


BAD = [
    (["allreduce", "-b", "1.5M"], "is not a size"),
    (["allreduce", "-b", "2", "-d", "float32"], "less than one float32 element"),
    (["allreduce", "-n", "0"], "must be at least 1"),
    (["allreduce", "--backend", "gloo,mpi"], "give one backend"),
    (["allreduce", "--backend", "mpi", "-d", "bfloat16"], "MPI has no standard bfloat16"),
    (["latency", "-b", "64", "-k", "100"], "-k 100 is larger than S in elements"),
    (["latency", "-k", "0"], "must be at least 1"),
    (["flagsync", "-n", "0"], "must be at least 1"),
    (["flagsync", "-n", "-5"], "must be at least 1"),
    (["demo", "--backend", "nccl"], "needs a CUDA GPU"),
    (["demo", "--backend", "ucc"], "--backend: invalid choice: 'ucc'"),
]


@pytest.fixture(scope="module")
def bad_runs(procs):
    """Every bad input, three jobs at a time (each mostly waits)."""
    return at_once(lambda args: mpirun(2, args, timeout=60), [a for a, _ in BAD])


@pytest.mark.parametrize("case", range(len(BAD)), ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_one_line_exit_2(bad_runs, case):
    message = BAD[case][1]
    done = bad_runs[case]
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and message in lines[0], show(done)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["demo", "flagsync", "latency", "allreduce"])
def test_mpi_backend_needs_an_mpi_launcher(command):
    done = lone([command, "--backend", "mpi"])
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and "--backend mpi needs an MPI launcher" in lines[0], show(done)

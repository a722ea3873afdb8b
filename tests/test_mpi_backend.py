"""run --backend mpi: the same sweep through mpi4py, checked; gloo,mpi side by side."""
import argparse
import json

import pytest

from conftest import at_once, lone, mpibench_lines, mpirun, show
from mpibench.commands.common import options as cli

SMALL = ["-b", "64", "-e", "16K", "-f", "16", "-n", "2", "-w", "1", "--probe-iters", "0"]
MPI_DTYPES = {"float", "double", "int32", "int64", "int8", "uint8"}


@pytest.mark.parametrize("np", (2, 3))
@pytest.mark.usefixtures("procs")
def test_every_dtype_and_op_checks_clean(tmp_path, np):
    path = tmp_path / "mpi.json"
    done = mpirun(np, ["run", "--backend", "mpi", "--collectives", "all", "-d", "all", "-o", "all",
                       "-c", "1", "--json", str(path)] + SMALL, timeout=240)
    assert done.returncode == 0, show(done)
    doc = json.loads(path.read_text())
    rows = doc["results"]
    assert doc["out_of_bounds"] == {"count": 0, "okay": True}
    checked = [row[m] for row in rows for m in ("out_of_place", "in_place") if row[m]]
    assert checked and all(m["nwrong"] == 0 for m in checked), show(done)
    assert {row["backend"] for row in rows} == {"mpi"}
    assert {row["type"] for row in rows} == MPI_DTYPES
    assert {row["collective"] for row in rows} == {"all_reduce", "all_gather", "reduce_scatter",
                                                   "broadcast", "reduce", "all_to_all", "sendrecv",
                                                   "gather", "scatter", "alltoallv"}
    assert {row["redop"] for row in rows if row["collective"] == "all_reduce"} == \
        {"sum", "prod", "min", "max"}
    # MPI's all_reduce and reduce run out of place too; its reduce_scatter in place does not.
    ar = [row for row in rows if row["collective"] == "all_reduce"]
    assert all(row["out_of_place"] and row["in_place"] for row in ar)
    assert all(row["in_place"] is None for row in rows if row["collective"] == "reduce_scatter")
    assert "all_reduce float16 sum: skipped, MPI has no standard float16 datatype" in done.stdout
    assert "all_reduce float32 avg: skipped, MPI has no average op" in done.stdout


@pytest.mark.usefixtures("procs")
def test_nonblocking_mpi_checks_clean(tmp_path):
    path = tmp_path / "nb.json"
    done = mpirun(2, ["run", "--backend", "mpi", "-z", "0", "--json", str(path)] + SMALL)
    assert done.returncode == 0, show(done)
    doc = json.loads(path.read_text())
    assert doc["config"]["blocking"] == 0 and doc["out_of_bounds"]["count"] == 0
    assert len(doc["results"]) >= 9


@pytest.mark.usefixtures("procs")
def test_corrupted_rank_is_caught_on_mpi():
    done = mpirun(2, ["run", "--backend", "mpi", "--collectives", "all_gather"] + SMALL,
                  env={"MPIBENCH_FAULT": "corrupt:1"})
    assert done.returncode == 1, show(done)
    assert "FAILED" in done.stdout and len(mpibench_lines(done.stderr)) == 1


@pytest.mark.usefixtures("procs")
def test_gather_and_scatter_wrong_values_are_caught(tmp_path):
    """Rank 1 is the root: a wrong value in what it gathers, and in what it is scattered."""
    path = tmp_path / "bad.json"
    done = mpirun(3, ["run", "--backend", "gloo,mpi", "--collectives", "gather,scatter", "-r", "1",
                      "--json", str(path)] + SMALL, env={"MPIBENCH_FAULT": "corrupt:1"})
    assert done.returncode == 1, show(done)
    rows = json.loads(path.read_text())["results"]
    assert {(r["backend"], r["collective"]) for r in rows} == {
        (b, c) for b in ("gloo", "mpi") for c in ("gather", "scatter")}
    for r in rows:
        assert r["root"] == 1
        for m in ("out_of_place", "in_place"):
            assert r[m]["nwrong"] == 1, r      # one poisoned element, counted once
            assert r["per_rank_nwrong"][m][1] == 1 and r["per_rank_nwrong"][m][0] in (0, None)


@pytest.mark.usefixtures("procs")
def test_gloo_and_mpi_side_by_side(tmp_path):
    path = tmp_path / "both.json"
    done = mpirun(2, ["run", "--backend", "gloo,mpi", "--collectives", "all_reduce,all_gather",
                      "--json", str(path)] + SMALL)
    assert done.returncode == 0, show(done)
    doc = json.loads(path.read_text())
    assert {row["backend"] for row in doc["results"]} == {"gloo", "mpi"}
    assert "# ======== backend gloo ========" in done.stdout
    assert "# ======== backend mpi ========" in done.stdout
    assert "# gloo vs mpi: busbw ratio mpi/gloo per size" in done.stdout
    comp = doc["comparison"]
    assert comp["backends"] == ["gloo", "mpi"] and comp["memory"] == {"gloo": "host", "mpi": "host"}
    assert "# buffers:" not in done.stdout and " moves " not in done.stdout
    sizes = {row["size"] for row in doc["results"] if row["collective"] == "all_reduce"}
    ar = [c for c in comp["rows"] if c["collective"] == "all_reduce"]
    assert {c["size"] for c in ar} == sizes and all(c["mode"] == "in_place" for c in ar)
    for c in comp["rows"]:
        # Same bytes on both sides: the bandwidth ratio is the inverse ratio of the times.
        assert c["busbw_ratio"] == pytest.approx(c["gloo_time_us"] / c["mpi_time_us"], rel=1e-6)
        assert c["gloo_busbw_GBps"] > 0 and c["mpi_busbw_GBps"] > 0
    assert set(doc["average_bus_bandwidth_by_backend"]) == {"gloo", "mpi"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("#  all_reduce ")]
    assert len(lines) == len(ar)
    for line, c in zip(lines, ar):
        assert float(line.split()[-1]) == pytest.approx(c["busbw_ratio"], abs=0.006)


BAD = [(["-d", "float16"], "MPI has no standard float16 datatype"),
       (["-o", "avg"], "MPI has no average op"),
       (["--backend", "gloo,nccl"], "one torch backend per job"),
       (["--backend", "mpi,mpi"], "distinct backends")]


@pytest.fixture(scope="module")
def bad_runs(procs):
    """Every bad input, three jobs at a time (each mostly waits)."""
    def one(args):
        base = ["run", "--backend", "mpi"] if "--backend" not in args else ["run"]
        return mpirun(2, base + args + SMALL, timeout=60)
    return at_once(one, [a for a, _ in BAD])


@pytest.mark.parametrize("case", range(len(BAD)), ids=["float16", "avg", "two-torch", "twice"])
def test_bad_mpi_input_one_line_exit_2(bad_runs, case):
    message = BAD[case][1]
    done = bad_runs[case]
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and message in lines[0], show(done)


@pytest.mark.usefixtures("procs")
def test_mpi_without_an_mpi_launcher_exits_2():
    done = lone(["run", "--backend", "mpi"] + SMALL)
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and "needs an MPI launcher" in lines[0]


def test_backend_option_parsing():
    p = argparse.ArgumentParser()
    cli.add_backend(p, several=True)
    assert p.parse_args(["--backend", "gloo,mpi"]).backend == ("gloo", "mpi")
    assert p.parse_args([]).backend == ("auto",)
    assert cli.torch_backend(("mpi",)) is None
    assert cli.torch_backend(("mpi", "gloo")) == "gloo"
    one = argparse.ArgumentParser()
    cli.add_backend(one, cli.AUTO_AND_TORCH_BACKENDS)
    assert "mpi" not in one.format_help()

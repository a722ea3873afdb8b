"""The foundation under real launchers: who is where, bad input, and a rank that fails.

Every test starts real processes (mpirun, torchrun, a lone python); each one costs a
few seconds, mostly `import torch`.
"""
import socket

import pytest

from mpibench.results import preamble

from conftest import MPIRUN, at_once, check_usage_error, lone, mpibench_lines, mpirun, run, show, torchrun

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("procs")]

HOST = socket.gethostname()


def info_rows(done):
    """{rank: (host, local rank, device, backend, launcher)} from `mpibench info`'s table."""
    rows = {}
    for line in done.stdout.splitlines():
        fields = line.split()
        if len(fields) == 7 and fields[0].isdigit():
            rank, host, _pid, local, device, backend, launcher = fields
            assert int(rank) not in rows, f"rank {rank} listed twice\n{show(done)}"
            rows[int(rank)] = (host, int(local), device, backend, launcher)
    return rows


def ompi_local_ranks(np):
    """{rank: local rank} as Open MPI itself hands them out for this -np (deterministic)."""
    root = ["--allow-run-as-root"] if __import__("os").geteuid() == 0 else []
    done = run([MPIRUN] + root + ["--oversubscribe", "-np", str(np), "sh", "-c",
                                  "echo ompi $OMPI_COMM_WORLD_RANK $OMPI_COMM_WORLD_LOCAL_RANK"])
    assert done.returncode == 0, show(done)
    pairs = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("ompi ")]
    return {int(r): int(lr) for r, lr in pairs}


def check_info(done, n, launcher):
    assert done.returncode == 0, show(done)
    assert f"# mpibench info: {n} rank{'s' if n != 1 else ''} on 1 host" in done.stdout, show(done)
    rows = info_rows(done)
    assert sorted(rows) == list(range(n)), show(done)
    assert {r[0] for r in rows.values()} == {HOST}, show(done)
    # Open MPI 5 may not number local ranks in rank order: a permutation is what counts
    assert sorted(r[1] for r in rows.values()) == list(range(n)), show(done)
    assert {(r[2], r[3], r[4]) for r in rows.values()} == {("cpu", "gloo", launcher)}, show(done)
    assert "Traceback" not in done.stderr, show(done)
    return rows


@pytest.mark.parametrize("np", [1, 2, 4])
def test_mpirun_info(np):
    rows = check_info(mpirun(np, ["info"]), np, "openmpi")
    assert {r: row[1] for r, row in rows.items()} == ompi_local_ranks(np)


def test_mpirun_mpi4py_info():
    check_info(mpirun(2, ["info"], mpi4py=True), 2, "openmpi")


def test_torchrun_info():
    check_info(torchrun(2, ["info"]), 2, "torchrun")


def test_lone_info():
    done = lone(["info"])
    check_info(done, 1, "none")
    assert "rendezvous 127.0.0.1:" in done.stdout, show(done)


def test_hosts_whose_versions_differ_are_named_against_rank_0s():
    same = {"torch": "2.13.0", "mpi": "Open MPI v5.0.11"}
    per_host = {"n1": same, "n2": same, "n3": dict(same, torch="2.12.1")}
    assert preamble.version_differences(per_host) == [
        "WARNING: host n3 differs from n1 (rank 0): torch 2.12.1 vs 2.13.0"]
    assert preamble.version_differences({"n1": same}) == preamble.version_differences({}) == []


def test_options_without_a_command_run_the_benchmark():
    done = lone(["-b", "64", "-e", "64", "-n", "1", "-w", "0", "--collectives", "all_reduce"])
    assert done.returncode == 0, show(done)
    assert "# mpibench run: all_reduce" in done.stdout, show(done)


# --- bad input: one line from rank 0, exit 2 on every rank, no traceback, quickly ---
# Time bounds leave room for a loaded 2-core machine (idle: parse errors about 1 s, the
# nccl check about 5 s, a failing rank about 2 s); a hang would run into the timeouts.


# Parse errors are found before torch or MPI is loaded (well under a second per run),
# so each is tried a few times: a lost error line is a race, not a constant.
@pytest.mark.parametrize("args, words", [
    (["bogus"], "unknown command 'bogus'"),
    (["info", "--bogus"], "unrecognized arguments: --bogus"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["info", "--backend", "foo"], "--backend: invalid choice: 'foo'"),
    (["info", "--timeout", "0"], "--timeout"),
], ids=["command", "option", "option-no-command", "backend-name", "timeout"])
def test_parse_error(args, words):
    for done in at_once(lambda _: mpirun(2, args), range(3)):
        check_usage_error(done, words, seconds=15)


def test_nccl_without_cuda():
    done = mpirun(2, ["info", "--backend", "nccl"])
    check_usage_error(done, "--backend nccl needs a CUDA GPU", seconds=45)


# --- a rank that raises: the job ends at once, naming the rank and its host ---

@pytest.mark.parametrize("mpi4py", [False, True], ids=["python", "mpi4py"])
def test_rank_that_raises_aborts_the_job(mpi4py):
    done = mpirun(3, ["info"], env={"MPIBENCH_FAULT": "raise:1"}, mpi4py=mpi4py, timeout=60)
    assert done.returncode != 0, show(done)
    assert done.elapsed < 20, show(done)
    failed = [line for line in mpibench_lines(done.stderr) if "failed" in line]
    assert len(failed) == 1, show(done)
    assert f"rank 1 (host {HOST})" in failed[0], show(done)
    assert "MPIBENCH_FAULT" in failed[0], show(done)
    assert "Traceback" not in done.stderr, show(done)


def test_help_and_version_print_once():
    done = mpirun(2, ["--version"])
    assert done.returncode == 0 and done.stdout.count("mpibench 0.") == 1, show(done)
    done = mpirun(2, ["info", "-h"])
    assert done.returncode == 0 and done.stdout.count("usage: mpibench info") == 1, show(done)

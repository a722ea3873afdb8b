"""mpibench under a real SLURM cluster (slurmctld, slurmd and munged in namespace nodes):
the sbatch scripts as a user submits them, and srun with and without PMIx.

Needs root; SLURM is installed with apt when missing (skipped when that fails)."""
import os

import pytest

from launch_helpers import (PY, ROOT, TINY_RUN, VENV, assert_run_ok, env, info_rows,
                            run_doc)
import fakecluster  # noqa: E402  (launch_helpers put launch/ on sys.path)
import slurmcluster  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("slurm"),
    pytest.mark.skipif(not (VENV / "bin" / "mpirun").exists(), reason=f"no mpirun in {VENV}"),
]


@pytest.fixture(scope="module")
def slurm(hosts):
    with slurmcluster.cluster_or_skip(pytest.skip, nodes=3, cpus=4) as sc:
        yield sc


# The cluster has three nodes; two-node jobs name theirs, so that a node still
# completing the previous job cannot move them to h2 and h3.
TWO_NODES = ["-w", "h1,h2"]


def _job_env(results):
    e = env(MPIBENCH_HOME=ROOT, MPIBENCH_RESULTS=results)
    for var in [v for v in e if v.startswith("SLURM_")]:
        del e[var]      # a test run inside someone's job must not leak its allocation
    return e


def _sbatch(slurm, script, args, tmp_path, sbatch_args=(), **extra):
    results = tmp_path / "results"
    r, job = slurm.sbatch(ROOT / "sbatch" / script, args, timeout=240,
                          env={**_job_env(results), **extra}, sbatch_args=sbatch_args)
    out = slurm.job_output(job) if job else ""
    assert r.returncode == 0 and job, out + r.stdout + r.stderr + slurm.logs()
    folder = results / str(job)
    wanted = {"job.txt", "output.txt"} | ({"results.json"} if args[0] == "run" else set())
    assert {p.name for p in folder.iterdir()} == wanted
    return folder, out


def test_2node_sbatch_mpirun_inside_allocation(slurm, tmp_path):
    # 2 ranks per node in a 1-task-per-node allocation: the path GPU partitions take
    # (--gpus-per-node=2 gives the same ranks per node).  mpirun leaves the stale
    # SLURM_PROCID=0 on every rank; the ranks must still be 0..3 from OMPI_*.
    folder, out = _sbatch(slurm, "2node.sbatch", TINY_RUN, tmp_path, TWO_NODES,
                          MPIBENCH_PPN="2")
    doc = run_doc(folder / "results.json")
    assert_run_ok(doc, ["h1", "h2"], 2, "openmpi")
    text = (folder / "output.txt").read_text()
    assert "# Out of bounds values : 0 OK" in text and text in out
    assert "2 ranks per node" in (folder / "job.txt").read_text()


def test_srun_sbatch_pmix(slurm, tmp_path):
    folder, _ = _sbatch(slurm, "srun.sbatch", TINY_RUN, tmp_path,
                        sbatch_args=[*TWO_NODES, "--ntasks-per-node=1"])
    assert_run_ok(run_doc(folder / "results.json"), ["h1", "h2"], 1, "slurm-pmix")


def test_nnode_sbatch_any_node_count(slurm, tmp_path):
    folder, _ = _sbatch(slurm, "nnode.sbatch", ["info"], tmp_path, sbatch_args=["-N", "3"])
    rows = info_rows((folder / "output.txt").read_text())
    assert rows == [(0, "h1", 0, "openmpi"), (1, "h2", 0, "openmpi"), (2, "h3", 0, "openmpi")]


def _srun(slurm, srun_args, args, tmp_path):
    r = slurm.srun([PY, "-m", "mpibench", *args], srun_args=["-N2", *TWO_NODES, *srun_args],
                   env=_job_env(tmp_path), timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr + slurm.logs()
    return r


@pytest.mark.parametrize("mpi,launcher", [("none", "slurm"), ("pmix", "slurm-pmix")])
def test_srun_info(slurm, tmp_path, mpi, launcher):
    # 3 tasks on 2 nodes: h1 gets ranks 0 and 1, h2 rank 2 (local ranks restart).
    r = _srun(slurm, [f"--mpi={mpi}", "-n3"], ["info"], tmp_path)
    assert info_rows(r.stdout) == [(0, "h1", 0, launcher), (1, "h1", 1, launcher),
                                   (2, "h2", 0, launcher)], r.stdout


def test_plain_srun_small_run(slurm, tmp_path):
    out = tmp_path / "r.json"
    _srun(slurm, ["--mpi=none", "--ntasks-per-node=1"], [*TINY_RUN, "--json", out], tmp_path)
    assert_run_ok(run_doc(out), ["h1", "h2"], 1, "slurm")


def test_healthcheck_drains_the_faulty_node_only(slurm, tmp_path):
    # sbatch/healthcheck.sh on two nodes at once, as slurmd starts HealthCheckProgram (root,
    # settings from its config file, SLURMD_NODENAME): h3's test inside the host is slowed
    # by the test-only fault switch, h2 is healthy. Only h3 is drained, with the reason.
    import concurrent.futures
    expect = tmp_path / "expect.json"
    expect.write_text('{"intra": {"min_busbw_GBps": 0.001}}')     # 64K here: 0.02-0.2 GB/s
    config = tmp_path / "health.env"
    config.write_text(f"MPIBENCH_PYTHON={PY}\nMPIBENCH_HEALTH_RANKS=2\nMPIBENCH_HEALTH_ARGS=\"-b 64K "
                      f"-n 2 -w 1 --timeout 120 --expect {expect} "
                      f"--metrics {tmp_path}/$SLURMD_NODENAME.prom\"\n")
    extra = dict(MPIBENCH_HEALTH_CONFIG=config, MPIBENCH_TESTING=1,
                 MPIBENCH_FAULT="slowhost:0:h3,slowhost:1:h3")

    def check(node):
        return slurm.run([ROOT / "sbatch" / "healthcheck.sh"], host=node, timeout=200,
                         env=_job_env(tmp_path) | {k: str(v) for k, v in extra.items()}
                         | {"SLURMD_NODENAME": node})
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            healthy, faulty = pool.map(check, ["h2", "h3"])
        assert (healthy.returncode, healthy.stdout) == (0, "h2 | Healthy\n"), healthy.stderr
        assert faulty.returncode == 1, faulty.stdout + faulty.stderr
        assert faulty.stdout.startswith("h3 | ERROR: mpibench: inside the host: busbw "), faulty.stdout
        assert len(faulty.stdout.splitlines()) == 1, faulty.stdout
        states = slurm.run(["sinfo", "-h", "-N", "-n", "h2,h3", "-o", "%N|%t|%E"]).stdout
        got = {n: (t, r) for n, t, r in (line.split("|") for line in states.strip().splitlines())}
        assert got["h2"] == ("idle", "none"), states
        assert got["h3"][0] in ("drain", "drng") and got["h3"][1].startswith(
            "mpibench: inside the host: busbw"), states
        assert "mpibench_health_passed{command=\"check --health\",node=\"h3\"} 0" in \
            (tmp_path / "h3.prom").read_text()
    finally:
        slurm.run(["scontrol", "update", "nodename=h3", "state=resume"])

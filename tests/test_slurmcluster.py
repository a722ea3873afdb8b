"""A real 2-node SLURM cluster (slurmctld, slurmd, munged) in namespaces.

Needs root, ip/nsenter/unshare and SLURM (installed with apt when missing;
the tests skip when that fails).  One cluster serves the whole module.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import slurmcluster  # noqa: E402
from slurmcluster import SlurmCluster  # noqa: E402


VENV = Path(os.environ.get("MPIBENCH_VENV", sys.prefix))
SCRIPTS = HERE / "scripts"
DEBIAN_MPIRUN = Path("/usr/bin/mpirun.openmpi")

pytestmark = [
    pytest.mark.usefixtures("slurm"),
]


def _rows(text):
    # One record per "rank=..." group: Open MPI 4 can write two ranks' lines as one.
    return [dict(kv.split("=", 1) for kv in rec.split())
            for rec in re.findall(r"rank=\S+(?: [a-z]+=[^\s=]+?(?=rank=|\s|$))*", text)]


@pytest.fixture(scope="module")
def slurm(hosts):
    with slurmcluster.cluster_or_skip(pytest.skip, nodes=2, cpus=4) as sc:
        yield sc


def test_sbatch_runs_srun_on_both_nodes(slurm, tmp_path):
    job = tmp_path / "job.sh"
    job.write_text("#!/bin/sh\n#SBATCH --nodes=2 --ntasks-per-node=1\n"
                   "srun hostname\necho conf=$SLURM_CONF\n")
    r, job_id = slurm.sbatch(job, timeout=60)
    assert r.returncode == 0, r.stderr + slurm.logs()
    assert isinstance(job_id, int)
    out = slurm.job_output(job_id)
    assert sorted(out.split()[:2]) == ["h1", "h2"], out
    assert f"conf={slurm.conf}" in out


def test_srun_pmix_sets_ranks(slurm):
    r = slurm.srun(["--mpi=list"], timeout=30)
    assert "pmix" in r.stdout + r.stderr
    code = ("import os, socket; e = os.environ; "
            "print('rank=%s procid=%s host=%s' % (e.get('PMIX_RANK'), e.get('SLURM_PROCID'), "
            "socket.gethostname()))")
    r = slurm.srun([sys.executable, "-c", code], srun_args=["--mpi=pmix", "-N2", "-n4"],
                   timeout=60)
    assert r.returncode == 0, r.stderr + slurm.logs()
    rows = _rows(r.stdout)
    assert sorted(int(x["rank"]) for x in rows) == [0, 1, 2, 3]
    assert all(x["rank"] == x["procid"] for x in rows)
    assert {x["host"] for x in rows} == {"h1", "h2"}


def _mpirun_in_allocation(slurm, mpirun):
    r, job_id = slurm.sbatch(SCRIPTS / "mpirun_in_alloc.sh", [mpirun], timeout=90)
    out = slurm.job_output(job_id)
    assert r.returncode == 0, out + r.stderr
    rows = sorted(_rows(out), key=lambda x: int(x["rank"]))
    assert [(x["host"], x["local"]) for x in rows] == \
        [("h1", "0"), ("h1", "1"), ("h2", "0"), ("h2", "1")], out


@pytest.mark.skipif(not DEBIAN_MPIRUN.exists(), reason="Debian openmpi-bin not installed")
def test_debian_openmpi4_mpirun_inside_allocation(slurm):
    _mpirun_in_allocation(slurm, DEBIAN_MPIRUN)


@pytest.mark.skipif(not os.access(VENV / "bin" / "mpirun", os.X_OK), reason=f"no mpirun in {VENV}")
def test_pip_openmpi5_mpirun_inside_allocation(slurm):
    _mpirun_in_allocation(slurm, VENV / "bin" / "mpirun")


def test_teardown_kills_daemons_and_namespaces(slurm):
    try:
        slurmcluster.require_slurm()
    except RuntimeError as e:
        pytest.skip(str(e))
    sc = SlurmCluster(nodes=1, cpus=2)
    with sc:
        procs = list(sc.fc._procs)
        assert len(procs) == 3  # munged, slurmctld, slurmd
        tag = sc.fc.tag
    assert all(p.poll() is not None for p in procs)
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                        timeout=10).stdout
    assert tag not in ns
    assert not sc.dir.exists()

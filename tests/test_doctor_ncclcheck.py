"""doctor's own NCCL transport check: started as the module that exists, and a check that
fails to run makes doctor fail (exit 1 on every rank), not a quiet 'findings' line."""
import json

import pytest

from conftest import mpibench_lines, mpirun, show

pytestmark = pytest.mark.usefixtures("procs")


def test_doctor_exits_1_when_its_nccl_check_fails_to_run(tmp_path):
    """The switch starts the real probe process on both ranks of a CPU-only host: it starts
    (the module resolves) and fails in torch's CUDA setup; doctor still prints its report,
    names the rank and host once, and every rank exits 1."""
    out = tmp_path / "doctor.json"
    done = mpirun(2, ["doctor", "--nccl-timeout", "60", "--json", str(out)],
                  env={"MPIBENCH_FAULT": "ncclcheck:0,ncclcheck:1"}, timeout=180)
    assert done.returncode == 1, show(done)
    assert "No module named" not in done.stdout + done.stderr, show(done)
    failed = [line for line in done.stdout.splitlines() if "CHECK FAILED TO RUN" in line]
    assert len(failed) == 2, show(done)
    assert "rank 0" in failed[0] and "rank 1" in failed[1], show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and "2 checks failed to run" in lines[0], show(done)
    assert "Traceback" not in done.stderr, show(done)
    assert "#   not read: the probe did not print them" in done.stdout, show(done)
    doc = json.loads(out.read_text())
    assert len(doc["doctor"]["nccl_check"]["errors"]) == 2


def test_doctor_exits_0_when_the_nccl_check_is_skipped():
    """No GPU and no switch: the check is skipped with its reason, which is no failure."""
    done = mpirun(2, ["doctor"], timeout=180)
    assert done.returncode == 0, show(done)
    assert "not checked: no CUDA GPU" in done.stdout, show(done)
    # NCCL's effective parameters: one line says why they are not read (CPU torch, no libnccl)
    section = done.stdout.split("# NCCL effective parameters")[1].split("#\n")[0].splitlines()[1:]
    assert section == ["#   not read: no libnccl loaded: torch without CUDA"], show(done)

"""train's replica check: bit for bit on gloo (fp32), within a stated tolerance under bf16
autocast on GPUs; a replica off by one part in a billion fails on gloo (test switch)."""
import json

import pytest

from conftest import mpibench_lines, mpirun, show
from mpibench.measure.training import BF16_LOSS_RTOL
from mpibench.results import trainfigures, traintext

QUICK = ["train", "--steps", "2", "--warmup", "1", "--alone-iters", "0"]


@pytest.mark.usefixtures("procs")
def test_a_replica_off_by_one_part_in_a_billion_fails_on_gloo(tmp_path):
    out = tmp_path / "t.json"
    done = mpirun(2, QUICK + ["--json", str(out)], env={"MPIBENCH_FAULT": "replica:1:1e-9"},
                  timeout=180)
    assert done.returncode == 1, show(done)
    assert "replicas             : DIFFER (allowed: bit for bit)" in done.stdout, show(done)
    assert mpibench_lines(done.stderr) == [
        "mpibench: FAILED: the replicas differ after synced steps (see 'replicas')"], show(done)
    rep = json.loads(out.read_text())["train"]["replicas"]
    assert rep["agree"] is False and rep["rtol"] == 0.0
    assert rep["spread"] == pytest.approx(1e-9, rel=0.01)


def test_bf16_tolerance_takes_rounding_and_refuses_divergence():
    loss = 6.2
    assert BF16_LOSS_RTOL == 1e-2
    assert trainfigures.replicas([loss, loss * (1 + 4e-3)], BF16_LOSS_RTOL)["agree"] is True
    assert trainfigures.replicas([loss, loss * (1 + 3e-2)], BF16_LOSS_RTOL)["agree"] is False
    assert trainfigures.replicas([loss, loss], 0.0)["agree"] is True
    assert trainfigures.replicas([loss, loss * (1 + 1e-12)], 0.0)["agree"] is False
    assert trainfigures.replicas([loss, None], BF16_LOSS_RTOL) == {
        "loss": [loss, None], "agree": False, "rtol": BF16_LOSS_RTOL, "spread": None}


def test_the_line_states_the_tolerance():
    bf16 = {"precision": "bf16 autocast", "replicas": trainfigures.replicas([6.2, 6.21], BF16_LOSS_RTOL)}
    assert traintext.replicas_line(bf16).startswith(
        "#  replicas             : agree within 1% (bf16 autocast), spread 0.0016, loss 6.2")
    bf16["replicas"] = trainfigures.replicas([6.2, 6.5], BF16_LOSS_RTOL)
    assert traintext.replicas_line(bf16) == ("#  replicas             : DIFFER (allowed: within 1% "
                                            "(bf16 autocast)): losses on a shared batch "
                                            "6.200000, 6.500000")

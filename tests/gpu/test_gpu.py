"""The NCCL path on a real CUDA GPU; skipped where torch sees none (CI has none).

Run on a GPU machine with `python -m pytest -q tests/gpu`. NCCL refuses two ranks on
one GPU, so with a single GPU these run one rank: lone, and under mpirun -np 1.
"""
import json

import pytest

from conftest import lone, mpirun, show

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU visible to torch")

SMALL = ["-b", "8", "-e", "4M", "-f", "4", "-n", "5", "-w", "2"]


def _rows(path):
    return json.loads(path.read_text())["results"]


@pytest.mark.parametrize("launch", ["lone", "mpirun"])
def test_every_collective_checks_clean_on_nccl(tmp_path, launch):
    out = tmp_path / "r.json"
    args = ["run", "--backend", "nccl", "-d", "float32,bfloat16,float16", "-c", "1",
            "--json", str(out)] + SMALL
    done = lone(args, timeout=600) if launch == "lone" else mpirun(1, args, timeout=600)
    assert done.returncode == 0, show(done)
    rows = _rows(out)
    assert {r["collective"] for r in rows} >= {"all_reduce", "all_gather", "reduce_scatter",
                                               "broadcast", "reduce", "all_to_all"}
    assert {r["dtype"] for r in rows} == {"float32", "bfloat16", "float16"}
    for r in rows:
        for mode in ("out_of_place", "in_place"):
            if r[mode]:
                assert r[mode]["nwrong"] == 0, r
                assert r[mode]["time_us"] > 0, r


@pytest.mark.parametrize("extra", [["-z", "0"], ["-z", "1"], ["-G", "3"]])
def test_blocking_modes_and_cuda_graphs(tmp_path, extra):
    out = tmp_path / "r.json"
    done = lone(["run", "--backend", "nccl", "--collectives", "all_reduce,all_gather",
                 "--json", str(out)] + SMALL + extra, timeout=600)
    assert done.returncode == 0, show(done)
    assert all(r[m]["nwrong"] == 0 for r in _rows(out) for m in ("out_of_place", "in_place") if r[m])


def test_device_line_names_the_gpu():
    done = lone(["info", "--backend", "nccl"], timeout=300)
    assert done.returncode == 0, show(done)
    assert "cuda:0" in done.stdout and "nccl" in done.stdout, show(done)


@pytest.mark.parametrize("command", [
    ["allreduce", "--payload", "64M", "--trials", "3"],
    ["latency", "-s", "64M", "-k", "100"],
    ["flagsync", "-n", "100"],
    ["demo"],
    ["doctor"],
])
def test_classic_and_diagnosis_commands_run_on_the_gpu(command):
    done = lone(command + ["--backend", "nccl"] if command[0] != "doctor" else command, timeout=600)
    assert done.returncode == 0, show(done)

"""`mpibench train` under a real mpirun on gloo: DDP and FSDP steps of the tiny model,
replicas that agree, exposed and hidden communication recomputed here from the per-rank
step times in the JSON; namespace hosts behind a 100 Mbit/s link; every bad input."""
import copy
import csv
import json
import math
import os
import socket
import statistics
import sys
from typing import get_type_hints

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "launch"))
import fakecluster  # noqa: E402
from conftest import (MPIRUN, PYTHON, at_once, base_env, check_usage_error, lone,  # noqa: E402
                      mpibench_lines, mpirun, mpirun_killed, show)

from mpibench.measure.training import fsdp_unsupported  # noqa: E402
from mpibench.results import schema  # noqa: E402

pytestmark = pytest.mark.timeout(300)

HOST = socket.gethostname()
TINY = dict(layers=2, hidden=256, heads=4, seq=128, vocab=8192)
QUICK = ["train", "--steps", "2", "--warmup", "1", "--alone-iters", "2"]


def parameters(layers, hidden, heads, seq, vocab):
    """GPT-2's parameter count, written out: embeddings, per block two LayerNorms,
    qkv, projection and the 4x MLP (weights and biases), the final LayerNorm; tied head."""
    h = hidden
    return vocab * h + seq * h + layers * (12 * h * h + 13 * h) + 2 * h


def load(path):
    doc = json.loads(path.read_text())
    assert doc["complete"] is True, doc
    return doc


def finite(values):
    return all(isinstance(v, float) and math.isfinite(v) for v in values)


@pytest.fixture(scope="module")
def ddp(procs, tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    done = mpirun(2, QUICK + ["--json", str(d / "t.json"), "--csv", str(d / "t.csv")],
                  timeout=180)
    return done, d


def test_ddp_steps_and_figures(ddp):
    done, d = ddp
    assert done.returncode == 0, show(done)
    doc = load(d / "t.json")
    t = doc["train"]
    assert doc["command"] == "train" and doc["world"]["size"] == 2
    assert t["model"] == {"preset": "tiny", **TINY, "parameters": parameters(**TINY)}
    assert t["parallel"] == "ddp" and t["precision"] == "fp32"
    assert [s["step"] for s in t["steps"]] == [1, 2]
    for s in t["steps"]:
        assert len(s["synced_s"]) == len(s["unsynced_s"]) == len(s["loss"]) == 2
        assert finite(s["synced_s"] + s["unsynced_s"] + s["loss"])
        assert min(s["synced_s"] + s["unsynced_s"]) > 0
    # The replicas agree: the same loss on a shared batch, bit for bit, on every rank.
    assert t["replicas"]["agree"] is True
    a, b = t["replicas"]["loss"]
    assert a == b and math.isfinite(a)
    # DDP's buckets hold every gradient once, in fp32.
    calls = t["collectives"]
    assert {c["collective"] for c in calls} == {"all_reduce"}
    grad = 4 * parameters(**TINY)
    assert sum(c["size"] * c["count"] for c in calls) == grad
    # The summary, recomputed from the per-rank times.
    s = t["summary"]
    synced = [max(x["synced_s"]) for x in t["steps"]]
    unsynced = [max(x["unsynced_s"]) for x in t["steps"]]
    assert s["step_s"] == pytest.approx(statistics.median(synced))
    assert s["compute_s"] == pytest.approx(statistics.median(unsynced))
    assert s["exposed_s"] == pytest.approx(statistics.median(
        [x - y for x, y in zip(synced, unsynced)]))
    assert s["exposed_share"] == pytest.approx(s["exposed_s"] / s["step_s"])
    assert s["tokens_per_s"] == pytest.approx(2 * 4 * TINY["seq"] / s["step_s"])
    assert s["samples_per_s"] == pytest.approx(2 * 4 / s["step_s"])
    assert s["gradient_bytes"] == grad and s["bus_bytes"] == pytest.approx(grad * 2 * (2 - 1) / 2)
    rows = {r["size"]: r["in_place"]["time_us"] for r in doc["results"]
            if r["collective"] == "all_reduce"}
    alone = sum(rows[c["size"]] * c["count"] for c in calls) / 1e6
    assert s["alone_s"] == pytest.approx(alone)
    assert s["hidden_share"] == pytest.approx(1 - s["exposed_s"] / alone)
    assert s["busbw_GBps"] == pytest.approx(grad / alone / 1e9)
    # The types name every field the command writes (keys they do not name go unchecked).
    assert set(t) == set(get_type_hints(schema.Train)) and set(s) == set(get_type_hints(schema.Summary))
    assert [m["rank"] for m in t["memory"]] == [0, 1]
    assert all(m["peak_bytes"] > 0 for m in t["memory"])
    assert [h["host"] for h in t["hosts"]["hosts"]] == [HOST]
    # What rank 0 printed (once).
    out = done.stdout
    assert out.count("# mpibench train: model tiny") == 1
    assert f"exposed comm         : {s['exposed_s'] * 1e3:.1f} ms" in out, show(done)
    assert "replicas             : agree" in out and "# slowest rank: rank" in out
    with open(d / "t.csv") as f:
        lines = list(csv.DictReader(f))
    assert [int(x["size"]) for x in lines] == sorted(rows)


@pytest.mark.usefixtures("procs")
def test_saved_train_result_reads_back(ddp, tmp_path):
    _, d = ddp
    path = str(d / "t.json")
    r = lone(["report", path])
    assert r.returncode == 0, show(r)
    assert "exposed comm" in r.stdout and "# one step's collectives: 1 x all_reduce" in r.stdout
    r = lone(["report", "--format", "markdown", path])
    assert r.returncode == 0 and "### Training steps" in r.stdout, show(r)
    r = lone(["compare", path, path])
    assert r.returncode == 0, show(r)
    assert "# train: throughput against the first file" in r.stdout and "1.000" in r.stdout
    slow = copy.deepcopy(json.loads((d / "t.json").read_text()))
    slow["train"]["summary"]["tokens_per_s"] /= 2
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    r = lone(["compare", path, str(tmp_path / "slow.json"), "--min-share", "0.9"])
    assert r.returncode == 1, show(r)
    assert f"# BELOW 0.9x: {tmp_path / 'slow.json'}: train throughput at 0.500x" in r.stdout
    r = lone(["plot", path, "--png", str(tmp_path / "p.png")])
    assert r.returncode == 0 and (tmp_path / "p.png").stat().st_size > 0, show(r)
    broken = copy.deepcopy(json.loads((d / "t.json").read_text()))
    broken["train"]["steps"][0]["unsynced_s"] = ["fast"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    r = lone(["report", str(tmp_path / "broken.json")])
    check_usage_error(r, "train.steps[0].unsynced_s[0]: str, expected number", 30)


@pytest.mark.usefixtures("procs")
def test_fsdp_steps(tmp_path):
    done = mpirun(2, QUICK + ["--parallel", "fsdp", "--json", str(tmp_path / "f.json")],
                  timeout=180)
    assert done.returncode == 0, show(done)
    t = load(tmp_path / "f.json")["train"]
    assert t["replicas"]["agree"] is True and finite(t["replicas"]["loss"])
    kinds = {c["collective"] for c in t["collectives"]}
    assert kinds == {"all_gather", "reduce_scatter"}
    # every parameter is reduce-scattered once (each shard padded to equal sizes)
    assert sum(c["size"] * c["count"] for c in t["collectives"]
               if c["collective"] == "reduce_scatter") >= 4 * parameters(**TINY)
    assert t["summary"]["exposed_s"] is not None and t["summary"]["hidden_share"] is not None


@pytest.mark.usefixtures("procs")
def test_compute_only_on_three_ranks(tmp_path):
    done = mpirun(3, ["train", "--parallel", "none", "--steps", "2", "--warmup", "0",
                      "--vocab", "1024", "--json", str(tmp_path / "n.json")], timeout=180)
    assert done.returncode == 0, show(done)
    t = load(tmp_path / "n.json")["train"]
    assert all(s["synced_s"] is None and len(s["unsynced_s"]) == 3 for s in t["steps"])
    assert t["collectives"] == [] and t["summary"]["exposed_s"] is None
    assert "compute step time per host" in done.stdout


@pytest.mark.usefixtures("procs")
def test_model_that_does_not_fit(tmp_path):
    out = tmp_path / "oom.json"
    done = mpirun(2, QUICK + ["--json", str(out)], env={"MPIBENCH_FAULT": "oom:1:1M"},
                  timeout=120)
    lines = mpibench_lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1, show(done)
    assert f"rank 1 (host {HOST}): the model does not fit: tiny (3.7M parameters" in lines[0]
    assert f"needs {4 * 4 * parameters(**TINY) / 2**20:.1f} MiB" in lines[0], show(done)
    assert "Traceback" not in done.stderr
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and "does not fit" in doc["incomplete"]


@pytest.mark.usefixtures("procs")
def test_killed_job_keeps_steps_seen(tmp_path):
    out = tmp_path / "killed.json"
    seen, _ = mpirun_killed(2, ["train", "--steps", "50", "--warmup", "0", "--vocab", "1024",
                                "--json", str(out)], r"\s+\d+\s+[\d.]+\s+[\d.]+\s", 2)
    assert len(seen) == 2
    t = json.loads(out.read_text())
    assert t["complete"] is False and t["train"]["summary"] is None
    steps = t["train"]["steps"][:2]
    assert [f"{max(s['synced_s']) * 1e3:.1f}" for s in steps] == [x[1] for x in seen]
    r = lone(["report", str(out)])
    assert r.returncode == 0 and "INCOMPLETE" in r.stdout and "no summary" in r.stdout, show(r)


BAD = [
    (["--preset", "gpt3"], "unknown model preset 'gpt3'"),
    (["--hidden", "100", "--heads", "3"], "--hidden 100 is not divisible by --heads 3"),
    # without --preset the preset is the device's: checked once the ranks know it
    (["--heads", "12"], "--hidden 256 is not divisible by --heads 12"),
    (["--layers", "0"], "--layers: must be at least 1: 0"),
    (["--vocab", "-5"], "--vocab: must be at least 1: -5"),
    (["--batch", "0"], "--batch: must be at least 1: 0"),
    (["--steps", "0"], "--steps: must be at least 1: 0"),
    (["--warmup", "4", "--steps", "3"], "--warmup 4 is larger than --steps 3"),
    (["--parallel", "zero"], "argument --parallel: invalid choice: 'zero'"),
]


@pytest.fixture(scope="module")
def bad_runs(ddp, tmp_path_factory):
    """Parse-time bad input, and baselines that cannot be compared, three jobs at a time."""
    d = tmp_path_factory.mktemp("bad")
    doc = json.loads((ddp[1] / "t.json").read_text())
    run = dict(copy.deepcopy(doc), command="run")
    del run["train"]
    (d / "run.json").write_text(json.dumps(run))
    baselines = [
        (["--scale-from", str(d / "run.json")], "a 'run' result, not a train result"),
        (["--vocab", "4096", "--scale-from", str(ddp[1] / "t.json")],
         "another model (layers 2, hidden 256, heads 4, seq 128, vocab 8192) than this run's "
         "(layers 2, hidden 256, heads 4, seq 128, vocab 4096)"),
    ]
    cases = BAD + baselines
    return list(zip(cases, at_once(lambda c: mpirun(2, ["train"] + c[0], timeout=120), cases)))


@pytest.mark.parametrize("case", range(len(BAD) + 2))
def test_bad_input(bad_runs, case):
    (_, words), done = bad_runs[case]
    check_usage_error(done, words, 60)


def test_fsdp_unsupported_backend_is_named():
    import torch
    assert fsdp_unsupported("gloo", torch) is None
    assert "does not run on the mpi backend" in fsdp_unsupported("mpi", torch)


# ---- namespace hosts: what a slow link costs the step ----

@pytest.mark.usefixtures("hosts")
def test_slow_link_exposes_communication(tmp_path):
    args = [PYTHON, "-m", "mpibench", "train", "--steps", "3", "--warmup", "1",
            "--alone-iters", "2", "--vocab", "2048"]
    one, two = tmp_path / "one-host.json", tmp_path / "two-hosts.json"
    with fakecluster.FakeCluster(hosts=2, rates="100mbit") as c:
        a = c.mpirun(args + ["--json", str(one)], ppn={"h1": 2}, mpirun=MPIRUN,
                     env=base_env(), timeout=150)
        assert a.returncode == 0, show(a)
        b = c.mpirun(args + ["--json", str(two), "--scale-from", str(one)], ppn=1,
                     mpirun=MPIRUN, env=base_env(), timeout=200)
    assert b.returncode == 0, show(b)
    local, remote = load(one), load(two)
    assert remote["world"]["hosts"] == ["h1", "h2"] and local["world"]["hosts"] == ["h1"]
    sl, sr = local["train"]["summary"], remote["train"]["summary"]
    print(f"exposed share: 1 host x 2 ranks {sl['exposed_share']:.3f}, "
          f"2 hosts x 1 rank at 100 Mbit/s {sr['exposed_share']:.3f}")
    assert sr["exposed_share"] > sl["exposed_share"], (sl, sr)
    sc = remote["train"]["scaling"]
    assert sc["rank_ratio"] == 1 and sc["baseline_hosts"] == 1
    assert sc["efficiency"] == pytest.approx(sr["tokens_per_s"] / sl["tokens_per_s"])
    assert sc["efficiency"] < 1
    assert f"scaling: {sc['speedup']:.2f}x on 1x the ranks: efficiency " \
           f"{sc['efficiency']:.2f}" in b.stdout, show(b)
    hosts = remote["train"]["hosts"]    # two hosts: neither named slow, at most the slower
    assert [h["host"] for h in hosts["hosts"]] == ["h1", "h2"] and hosts["slow_hosts"] == []
    assert "# SLOW HOST" not in b.stdout
    assert b.stdout.count("with two hosts a relative threshold cannot say") == len(hosts["pairs"])


@pytest.mark.usefixtures("procs")
def test_sweep_of_train(tmp_path):
    out = str(tmp_path / "sweep.json")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    launch = [MPIRUN] + root + ["--oversubscribe", "-np", "2", PYTHON, "-m", "mpibench",
                                "train", "--steps", "1", "--warmup", "0", "--alone-iters", "1",
                                "--vocab", "1024"]
    done = lone(["sweep", "--set", "OMPI_MCA_mpi_yield_when_idle=0,1", "-q", "--json", out,
                 "--"] + launch, timeout=180)
    assert done.returncode == 0, show(done)
    doc = json.loads(open(out).read())
    assert [s["rc"] for s in doc["settings"]] == [0, 0]
    steps = [s["train"]["step_s"] for s in doc["settings"]]
    assert all(x > 0 for x in steps)
    assert "# train steps per setting" in done.stdout
    for s in doc["settings"]:
        assert f"{s['train']['step_s'] * 1e3:.1f}" in done.stdout
    assert {r["setting"] for r in doc["results"]} == {s["setting"] for s in doc["settings"]}

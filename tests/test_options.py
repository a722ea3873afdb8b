"""One name, one meaning: the shared option names, old spellings with a note, nccl-tests'
flags and NCCL_TESTS_MIN_BW, the grouped top-level help; under a real mpirun."""
import json
import re

import pytest

from conftest import lone, mpibench_lines, mpirun, show

pytestmark = pytest.mark.timeout(300)

TINY = ["--collectives", "all_reduce", "-b", "1K", "-e", "2K", "-n", "2", "-w", "0",
        "--probe-iters", "0"]


def test_top_level_help_groups_commands_and_says_how_to_launch_and_exit_codes():
    from mpibench import commands
    done = lone(["--help"])
    assert done.returncode == 0, show(done)
    text = done.stdout
    for title in ("measure:", "diagnose:", "saved results:", "classic tests:"):
        assert f"\n{title}\n" in text, text
    listed = re.findall(r"^  (\w+) +\S", text, re.M)
    assert sorted(set(listed) & set(commands.NAMES)) == sorted(commands.NAMES), text
    assert "mpirun -np 16 --host n1:8,n2:8 python -m mpibench run" in text
    for code in ("0 ", "1 ", "2 ", "124 ", "128+N "):
        assert re.search(rf"^  {re.escape(code)}", text, re.M), code


def test_old_spellings_work_with_one_note_each(tmp_path):
    path = tmp_path / "a.json"
    done = mpirun(2, ["allreduce", "--payload", "64K", "--trials", "2", "-w", "0",
                      "--json", str(path)])
    assert done.returncode == 0, show(done)
    notes = [line for line in mpibench_lines(done.stderr) if "old spelling" in line]
    assert notes == ["mpibench: note: --payload is an old spelling: write -b (the old one goes in "
                     "the next release)",
                     "mpibench: note: --trials is an old spelling: write -n (the old one goes in "
                     "the next release)"], show(done)
    (row,) = json.loads(path.read_text())["results"]
    assert row["size"] == 64 << 10 and len(row["trials"]) == 2
    new = mpirun(2, ["latency", "-b", "64K", "-k", "4", "-w", "0"])
    assert new.returncode == 0 and "old spelling" not in new.stderr, show(new)


def test_nccl_tests_command_line_pastes_in(tmp_path):
    path = tmp_path / "nccl.json"
    done = mpirun(2, ["run", "--collectives", "all_reduce", "-g", "1", "-t", "1",
                      "--minbytes", "1K", "--maxbytes", "4K", "--stepfactor", "2", "--iters", "2",
                      "--warmup_iters", "1", "--datatype", "float32", "--op", "sum", "-N", "2",
                      "-T", "120", "-J", str(path), "--probe-iters", "0"])
    assert done.returncode == 0, show(done)
    doc = json.loads(path.read_text())          # nccl-tests' -J schema
    assert doc["version"] == 3 and "mpibench" not in doc.get("tool", "")
    cfg = doc["config"]
    assert (cfg["minimum_bytes"], cfg["maximum_bytes"], cfg["step_factor"]) == (1024, 4096, 2)
    assert (cfg["iterations"], cfg["warmup_iters"]) == (2, 1)
    assert [r["size"] for r in doc["results"]] == [1024, 2048, 4096]
    assert done.stdout.count("# trial ") == 2, show(done)          # -N 2: two run cycles
    assert "a row that takes over 120 s is called hung" in done.stdout, show(done)


@pytest.mark.parametrize("args, words", [
    (["-g", "2"], "-g 2: mpibench runs one GPU and one thread per process"),
    (["-t", "4"], "-t 4: mpibench runs one GPU and one thread per process"),
    (["-J", "a.json", "--json", "b.json"], "give -J FILE or --json FILE, not both"),
])
def test_nccl_tests_flags_mpibench_cannot_honour_are_refused(args, words):
    done = mpirun(2, ["run"] + TINY + args, timeout=60)
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert len(lines) == 1 and words in lines[0], show(done)


def test_min_busbw_from_nccl_tests_variable_and_option(tmp_path):
    path = tmp_path / "low.json"
    # a threshold no machine reaches: exit 1, as nccl-tests (below 0.9 of it)
    done = mpirun(2, ["run"] + TINY + ["--json", str(path)], env={"NCCL_TESTS_MIN_BW": "1e6"})
    assert done.returncode == 1, show(done)
    assert re.search(r"^# Avg bus bandwidth +: \S+ FAILED$", done.stdout, re.M), show(done)
    lines = mpibench_lines(done.stderr)
    assert any("below 900000 GB/s (0.9 x NCCL_TESTS_MIN_BW=1e6)" in line for line in lines), \
        show(done)
    doc = json.loads(path.read_text())
    assert doc["min_busbw"] == {"GBps": 900000.0, "source": "0.9 x NCCL_TESTS_MIN_BW=1e6",
                                "okay": False}
    report = lone(["report", str(path)])
    assert re.search(r"^# Avg bus bandwidth +: \S+ FAILED$", report.stdout, re.M), show(report)
    done = mpirun(2, ["run"] + TINY, env={"NCCL_TESTS_MIN_BW": "1e-9"})
    assert done.returncode == 0, show(done)
    assert re.search(r"^# Avg bus bandwidth +: \S+ OK$", done.stdout, re.M), show(done)
    done = mpirun(2, ["run"] + TINY + ["--min-busbw", "1e6"])
    assert done.returncode == 1 and "below 1e+06 GB/s (--min-busbw 1e+06)" in done.stderr, show(done)
    done = mpirun(2, ["run"] + TINY, env={"NCCL_TESTS_MIN_BW": "fast"})
    assert done.returncode == 2 and "NCCL_TESTS_MIN_BW='fast': not a number" in done.stderr, \
        show(done)


def test_train_names_its_model_and_scaling_run_apart_from_predict_and_check(tmp_path):
    """--model is predict's cost model and --baseline check's reference: train's are
    --preset and --scale-from (the old spellings still work, with a note)."""
    missing = tmp_path / "missing.json"
    done = mpirun(2, ["train", "--model", "tiny", "--baseline", str(missing)], timeout=120)
    assert done.returncode == 2, show(done)
    lines = mpibench_lines(done.stderr)
    assert lines[:2] == [
        "mpibench: note: --model is an old spelling: write --preset (the old one goes in the "
        "next release)",
        "mpibench: note: --baseline is an old spelling: write --scale-from (the old one goes in "
        "the next release)"], show(done)
    assert len(lines) == 3 and f"cannot read results file {missing}" in lines[2], show(done)

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


# every command with a relative threshold: (its command line, the old spelling, the old value,
# the share that old value means)
SHARES = [
    (["p2p"], "--threshold", "0.7", 0.7),
    (["check"], "--min", "0.7", 0.7),
    (["compare", "a.json", "b.json"], "--fail-below", "0.7", 0.7),
    (["run"], "--slow-margin", "0.25", 0.8),        # over 1.25 x the median time
    (["train"], "--slow-margin", "0.25", 0.8),
]


@pytest.mark.parametrize("line, old, value, share", SHARES, ids=[s[0][0] for s in SHARES])
def test_min_share_means_the_same_in_every_command(line, old, value, share):
    """Pure parsing: --min-share F is a share of a reference in every command, and each old
    spelling sets the same value with one note."""
    from mpibench import cli
    from mpibench.errors import UsageError
    _, new = cli.parse(line + ["--min-share", str(share)])
    assert new.min_share == pytest.approx(share) and not getattr(new, "deprecations", None)
    _, was = cli.parse(line + [old, value])
    assert was.min_share == pytest.approx(share)
    assert was.deprecations == [f"{old} is an old spelling: write --min-share (the old one goes "
                                f"in the next release)"]
    with pytest.raises(UsageError, match="--min-share: must be above 0 and at most 1: 1.5"):
        cli.parse(line + ["--min-share", "1.5"])


def test_old_threshold_spellings_run_with_one_note(tmp_path):
    """run --slow-margin X and --min-share 1/(1+X) give the same per-host analysis; compare
    --fail-below fails as --min-share does; each old spelling prints its note once."""
    margins = []
    for i, extra in enumerate((["--slow-margin", "0.25"], ["--min-share", "0.8"])):
        path = tmp_path / f"r{i}.json"
        done = mpirun(2, ["run", *TINY[:-1], "1", "--json", str(path), *extra])
        assert done.returncode == 0, show(done)
        notes = [line for line in mpibench_lines(done.stderr) if "old spelling" in line]
        assert notes == ([] if i else ["mpibench: note: --slow-margin is an old spelling: write "
                                       "--min-share (the old one goes in the next release)"]), \
            show(done)
        hosts = json.loads(path.read_text())["hosts"]
        assert hosts, show(done)
        margins.append({round(h["margin"], 9) for h in hosts})
    assert margins[0] == margins[1] == {0.25}
    base = json.loads((tmp_path / "r0.json").read_text())
    for row in base["results"]:
        for mode in ("out_of_place", "in_place"):
            if row.get(mode):
                row[mode] = {k: (v / 2 if k in ("algbw_GBps", "busbw_GBps") else v)
                             for k, v in row[mode].items()}
    half = tmp_path / "half.json"
    half.write_text(json.dumps(base))
    for flag in ("--fail-below", "--min-share"):
        done = lone(["compare", str(tmp_path / "r0.json"), str(half), flag, "0.8"])
        assert done.returncode == 1 and "below 0.8 x the baseline" in done.stderr, show(done)
        notes = [line for line in mpibench_lines(done.stderr) if "old spelling" in line]
        assert len(notes) == (flag == "--fail-below"), show(done)

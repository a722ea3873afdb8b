"""One name, one meaning: the shared option names, every nccl-tests option in its short and
long spellings (with '-' or '_'), NCCL_TESTS_MIN_BW, the table of every option in
docs/options.md, the grouped top-level help; under a real mpirun."""
import argparse
import json
import os
import re

import pytest

from conftest import ROOT, check_usage_error, lone, mpibench_lines, mpirun, show

pytestmark = pytest.mark.timeout(300)

TINY = ["--collectives", "all_reduce", "-b", "1K", "-e", "2K", "-n", "2", "-w", "0",
        "--probe-iters", "0"]


@pytest.mark.usefixtures("procs")
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


@pytest.mark.usefixtures("procs")
def test_nccl_tests_command_line_pastes_in(tmp_path):
    """nccl-tests' long options with '_' or '-', and those mpibench runs at one value at that
    value; -J into an existing name writes FILE.0 and says so, as nccl-tests does."""
    path = tmp_path / "nccl.json"
    path.write_text("keep me\n")
    done = mpirun(2, ["run", "--collectives", "all_reduce", "-g", "1", "-t", "1",
                      "--minbytes", "1K", "--maxbytes", "4K", "--stepfactor", "2", "--iters", "2",
                      "--warmup_iters", "1", "--datatype", "float", "--op", "sum", "-N", "2",
                      "-T", "120", "--output_file", str(path), "--probe-iters", "0",
                      "--per_iter_timing", "1", "--per-iter-skip", "1", "--agg_iters", "1",
                      "--parallel_init", "0", "-y", "0", "--report-cputime", "0", "-S", "0",
                      "--local_register", "0", "-D", "0", "-M", "0", "--unalign=0",
                      "--cudagraph", "0", "--run_cycles", "2"])
    assert done.returncode == 0, show(done)
    assert path.read_text() == "keep me\n"
    written = tmp_path / "nccl.json.0"
    assert f"# Writing JSON output to {written}\n" in done.stdout, show(done)
    doc = json.loads(written.read_text())          # nccl-tests' -J schema
    assert doc["version"] == 3 and "mpibench" not in doc.get("tool", "")
    cfg = doc["config"]
    assert (cfg["minimum_bytes"], cfg["maximum_bytes"], cfg["step_factor"]) == (1024, 4096, 2)
    assert (cfg["iterations"], cfg["warmup_iters"], cfg["per_iter_skip"]) == (2, 1, 1)
    assert [r["size"] for r in doc["results"]] == [1024, 2048, 4096]
    assert done.stdout.count("# trial ") == 2, show(done)          # -N 2: two run cycles
    assert "a row that takes over 120 s is called hung" in done.stdout, show(done)
    assert report_reads(written, 3)


def report_reads(path, rows):
    done = lone(["report", str(path)])
    assert done.returncode == 0, show(done)
    return len(re.findall(r"^\s+\d+\s+\d+\s+\w+", done.stdout, re.M)) >= rows


# every nccl-tests 2.19.6 option mpibench runs at one value: another value, and the reason
FIXED = [
    (["-g", "2"], "-g 2: mpibench runs one GPU and one thread per process"),
    (["--nthreads", "4"], "-t 4: mpibench runs one GPU and one thread per process"),
    (["--agg_iters", "4"], "-m 4: mpibench times one call per iteration"),
    (["-p", "1"], "-p 1: parallel initialisation is for several GPUs per process"),
    (["--stream_null=1"], "-y 1: torch.distributed launches NCCL calls on its own streams"),
    (["-C", "1"], "-C 1: mpibench reports elapsed time"),
    (["--report-timestamps", "1"], "-S 1: mpibench prints no timestamp per row"),
    (["-R", "2"], "-R 2: NCCL buffer registration is not reachable"),
    (["--cta_policy", "0"], "-x 0: mpibench does not set NCCL's per-communicator CTA policy"),
    (["-D", "1"], "-D 1: NCCL's device-side implementations are not reachable"),
    (["--device_cta_count", "16"], "-V 16: the device CTA count goes with -D above 0"),
    (["-M", "1"], "-M 1: nccl-tests' GPU memory report is not printed"),
    (["-u", "1"], "-u 1: misaligned buffers are not implemented"),
    (["-J", "a.json", "--json", "b.json"], "give -J FILE or --json FILE, not both"),
    (["--json-format", "nccl-tests"], "--json-format nccl-tests needs --json FILE"),
    (["--unstable", "0.2"], "--unstable 0.2 needs --trials K (K > 1)"),
]


@pytest.mark.usefixtures("procs")
def test_nccl_tests_options_mpibench_cannot_honour_are_refused():
    """Pure parsing, every case; then two of them as a user meets them, on every rank."""
    from mpibench import cli
    from mpibench.commands.common.options import NCCL_TESTS_FIXED
    from mpibench.errors import UsageError
    for args, words in FIXED:
        with pytest.raises(UsageError, match=re.escape(words)):
            cli.parse(["run"] + TINY + args)
    flags = {f for f, *_ in NCCL_TESTS_FIXED}
    assert flags == {"-t", "-g", "-m", "-p", "-y", "-C", "-S", "-R", "-x", "-D", "-V", "-M", "-u"}
    assert flags <= {words.split()[0] for _, words in FIXED}       # each refused above
    for args, words in (FIXED[2], FIXED[8]):
        done = mpirun(2, ["run"] + TINY + args, timeout=60)
        assert done.returncode == 2, show(done)
        lines = mpibench_lines(done.stderr)
        assert len(lines) == 1 and words in lines[0], show(done)


# nccl-tests 2.19.6's longopts table (src/common.cu): long name -> letter
NCCL_TESTS_OPTIONS = dict(
    nthreads="t", ngpus="g", minbytes="b", maxbytes="e", stepbytes="i", stepfactor="f",
    iters="n", agg_iters="m", warmup_iters="w", run_cycles="N", parallel_init="p", check="c",
    op="o", datatype="d", root="r", blocking="z", stream_null="y", timeout="T", cudagraph="G",
    report_cputime="C", report_timestamps="S", output_file="J", average="a", local_register="R",
    cta_policy="x", device_implementation="D", device_cta_count="V", memory="M", unalign="u",
    per_iter_timing="I", per_iter_skip="K", help="h")


def parsers():
    from mpibench import cli
    top = cli.build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_nccl_tests_option_is_an_option_of_run_in_both_spellings():
    """Every letter and long name of nccl-tests is one of run's options, '_' and '-' alike,
    and each letter goes with its own long name."""
    run = parsers()["run"]
    spellings = {s: a for a in run._actions for s in a.option_strings}
    assert len(NCCL_TESTS_OPTIONS) == 32
    for name, letter in NCCL_TESTS_OPTIONS.items():
        dashed = "--" + name.replace("_", "-")
        assert dashed in spellings, dashed
        if letter != "T":            # -T and --timeout: the same value, two entries
            assert f"-{letter}" in spellings[dashed].option_strings, (letter, name)
    from mpibench.commands.common.options import one_spelling
    assert one_spelling(run, ["--per_iter_timing", "1", "--warmup_iters=2", "--", "--a_b"]) == \
        ["--per-iter-timing", "1", "--warmup-iters=2", "--", "--a_b"]


def option_rows():
    """(spellings, commands) of every option, from the parsers, as docs/options.md lists them."""
    rows = {}
    for name, parser in parsers().items():
        for action in parser._actions:
            if action.option_strings and not isinstance(action, argparse._HelpAction):
                rows.setdefault(", ".join(f"`{s}`" for s in action.option_strings), []).append(name)
    return {k: ", ".join(v) for k, v in rows.items()}


def table_differences(text):
    """What the table under '## Every option' in TEXT says otherwise than the parsers."""
    doc, problems = {}, []
    for line in text.split("## Every option", 1)[-1].splitlines():
        m = re.match(r"^\| (`[^|]*`) \| ([\w, ]+) \| (.*\S) \|$", line)
        if m:
            if m[1] in doc:
                problems.append(f"docs/options.md lists {m[1]} twice")
            doc[m[1]] = m[2]
    code = option_rows()
    for key in sorted(set(code) - set(doc)):
        problems.append(f"docs/options.md lacks {key} ({code[key]})")
    for key in sorted(set(doc) - set(code)):
        problems.append(f"docs/options.md lists {key}, which no parser has")
    problems += [f"{k}: docs/options.md says {doc[k]}, the parsers {code[k]}"
                 for k in sorted(set(code) & set(doc)) if doc[k] != code[k]]
    return problems


def test_docs_table_of_every_option_is_the_parsers():
    with open(os.path.join(ROOT, "docs", "options.md")) as f:
        text = f.read()
    assert table_differences(text) == []
    # the check can fail: a row left out, a command added, a row no parser has
    wrong = text.replace("| `--per-rank` | run |", "| `--per-rank` | run, p2p |")
    wrong = re.sub(r"^\| `--logy` \|.*\n", "", wrong, flags=re.M) + "| `--fast` | run | x |\n"
    assert table_differences(wrong) == [
        "docs/options.md lacks `--logy` (plot)",
        "docs/options.md lists `--fast`, which no parser has",
        "`--per-rank`: docs/options.md says run, p2p, the parsers run"]


@pytest.mark.usefixtures("procs")
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


# one name, one meaning: the names that meant two things, and what each command now calls them
RENAMED = [
    (["doctor", "--root", "/"], ["doctor", "--sys-root", "/"], "root", "/"),
    (["verify", "--root", "/"], ["verify", "--sys-root", "/"], "root", "/"),
    (["predict", "a", "b", "--ranks", "4", "--check", "c"],
     ["predict", "a", "b", "--ranks", "4", "--measured", "c"], "check", ["c"]),
    (["check", "--collective", "all_gather"], ["check", "--collectives", "all_gather"],
     "collective", "all_gather"),
    (["p2p", "--ranks"], ["p2p", "--every-rank"], "ranks", True),
    (["verify", "--floor", "0.7"], ["verify", "--min-share", "0.7"], "floor", 0.7),
    (["allreduce", "--trials", "3"], ["allreduce", "-n", "3"], "trials", 3),
    (["train", "--model", "tiny"], ["train", "--preset", "tiny"], "model", "tiny"),
    (["train", "--baseline", "a.json"], ["train", "--scale-from", "a.json"], "baseline", "a.json"),
    (["run", "--slow-margin", "0.25"], ["run", "--min-share", "0.8"], "min_share", 0.8),
]


@pytest.mark.parametrize("old, new, dest, value", RENAMED,
                         ids=[f"{r[0][0]} {next(x for x in r[0] if x not in r[1])}"
                              for r in RENAMED])
def test_a_name_means_one_thing(old, new, dest, value):
    """Pure parsing: the name that meant something else here is refused; the new one works."""
    from mpibench import cli
    from mpibench.errors import UsageError
    with pytest.raises(UsageError):
        cli.parse(old)
    _, args = cli.parse(new)
    assert getattr(args, dest) == value


# every command with a relative threshold: its command line, and the share given
SHARES = [["p2p"], ["check", "--baseline", "a.json"], ["compare", "a.json", "b.json"], ["run"],
          ["train"], ["verify"]]


@pytest.mark.parametrize("line", SHARES, ids=[s[0] for s in SHARES])
def test_min_share_means_the_same_in_every_command(line):
    """Pure parsing: --min-share F is a share of a reference in every command."""
    from mpibench import cli
    from mpibench.errors import UsageError
    _, args = cli.parse(line + ["--min-share", "0.7"])
    assert (args.floor if line[0] == "verify" else args.min_share) == pytest.approx(0.7)
    with pytest.raises(UsageError, match="--min-share: must be above 0 and at most 1: 1.5"):
        cli.parse(line + ["--min-share", "1.5"])


@pytest.mark.usefixtures("procs")
def test_check_min_share_without_baseline_is_refused():
    check_usage_error(lone(["check", "--min-share", "0.5"]),
                      "--min-share needs --baseline: it is the share of the baseline's figure "
                      "below which check fails", 30)


@pytest.mark.usefixtures("procs")
def test_min_share_runs_in_run_and_compare(tmp_path):
    """run --min-share 0.8 is a host margin of 1/0.8 - 1; compare --min-share fails a half-speed
    file."""
    path = tmp_path / "r.json"
    done = mpirun(2, ["run", *TINY[:-1], "1", "--json", str(path), "--min-share", "0.8"])
    assert done.returncode == 0, show(done)
    hosts = json.loads(path.read_text())["hosts"]
    assert hosts and {round(h["margin"], 9) for h in hosts} == {0.25}, show(done)
    base = json.loads(path.read_text())
    for row in base["results"]:
        for mode in ("out_of_place", "in_place"):
            if row.get(mode):
                row[mode] = {k: (v / 2 if k in ("algbw_GBps", "busbw_GBps") else v)
                             for k, v in row[mode].items()}
    half = tmp_path / "half.json"
    half.write_text(json.dumps(base))
    done = lone(["compare", str(path), str(half), "--min-share", "0.8"])
    assert done.returncode == 1 and "below 0.8 x the baseline" in done.stderr, show(done)

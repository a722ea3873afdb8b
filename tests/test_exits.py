"""How every job ends: the launcher returns mpibench's code across hosts (1, 2, 124, 130,
143), every multi-rank command runs under the watchdog, input files are read on rank 0,
a closed stdout is no failure, doctor's code follows its worst finding, and the verdict
line is last. Real mpirun, real namespace hosts (root), real signals (test-only switches
in launch/faults.py make a rank stop or signal itself at a named step)."""
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, at_once, base_env, lone, mpibench_lines, mpirun, show

sys.path.insert(0, str(Path(ROOT) / "launch"))
import fakecluster  # noqa: E402

needs_hosts = pytest.mark.usefixtures("hosts")
pytestmark = pytest.mark.usefixtures("procs")

VERDICT = re.compile(r"^mpibench-verdict: exit=(\d+) status=(\w+) command=([\w-]+)$")
# Runs of each case in a row in the suite; more by hand with MPIBENCH_EXIT_REPS=N.
REPS = int(os.environ.get("MPIBENCH_EXIT_REPS", "1"))


def verdict(stdout):
    """(code, status, command) from the last line of stdout; None when it is not the verdict
    (the caller's assertion then shows the whole output)."""
    lines = stdout.rstrip("\n").splitlines()
    m = VERDICT.match(lines[-1]) if lines else None
    return (int(m.group(1)), m.group(2), m.group(3)) if m else None


# ---- 1. the launcher returns mpibench's code across hosts, every time ----
EXPECT_FAIL = '{"pair": {"min_busbw_GBps": 50}}'
# name -> (mpibench arguments, MPIBENCH_FAULT, code, status, words on stderr)
CASES = {
    "ok": (["demo"], "", 0, "ok", None),
    "wrong elements": (["demo"], "corrupt:2", 1, "failed", "demo FAILED: all_reduce"),
    "failing hosts": (["check", "-b", "256K", "-n", "2", "-w", "1", "--expect", "{expect}"], "",
                      1, "failed", "check FAILED: 3 hosts failed: h[1-3]"),
    "bad input after start": (["run", "--root", "5", "-e", "8"], "", 2, "usage",
                              "--root 5 is not a rank"),
    "bad input at parse time": (["demo", "--no-such-option"], "", 2, "usage",
                                "unrecognized arguments"),
    "hang": (["demo", "--timeout", "4"], "stop:2:demo: reduce_scatter", 124, "hang",
             "rank 2 (host h3): no answer within"),
    "SIGINT": (["demo"], "sigint:1:demo: all_gather", 130, "interrupted", None),
    "SIGTERM": (["demo"], "sigterm:2:demo: broadcast", 143, "terminated", None),
}


@needs_hosts
def test_launcher_returns_mpibench_code_across_three_hosts(tmp_path):
    """Each case REPS times in a row on 3 hosts: mpirun's own exit code, the verdict line,
    and the one error line. Open MPI 5's prterun crashed (139, 134) or hung tearing such
    jobs down when ranks exited non-zero on their own: rank 0 alone does, last, or aborts.
    A job ended together gets no line of the launcher's (namespace hosts' setpgid warning
    aside) and no NUL byte."""
    expect = tmp_path / "expect.json"
    expect.write_text(EXPECT_FAIL)
    seen = {}
    with fakecluster.FakeCluster(hosts=3, rates="1gbit") as c:
        for name, (args, fault, code, status, words) in CASES.items():
            if os.environ.get("MPIBENCH_EXIT_CASES", name) not in name:
                continue
            argv = [PYTHON, "-m", "mpibench", *[a.format(expect=expect) for a in args]]
            for k in range(REPS):
                done = c.mpirun(argv, ppn=1, env=base_env({"MPIBENCH_FAULT": fault}), timeout=150)
                seen.setdefault(name, []).append(done.returncode)
                said = f"{name}, run {k + 1}: " + show(done)
                assert done.returncode == code, said
                if name == "bad input at parse time":      # before any MPI: rank 0 alone says it
                    assert verdict(done.stdout) == (2, "usage", "demo"), said
                else:
                    assert verdict(done.stdout) == (code, status, args[0]), said
                if words:
                    assert any(words in line for line in mpibench_lines(done.stderr)), said
                assert "Traceback" not in done.stderr, said
                if code in (1, 2):     # ended together: rank 0 exits last, prterun adds nothing
                    assert [line for line in _launcher_lines(done.stderr)
                            if "plm:ssh: Warning: setpgid" not in line] == [], said
                    assert "\0" not in done.stderr, said
    print("exit codes seen:", seen)


# ---- 2. every multi-rank command under the watchdog ----
# command -> (arguments, the step at which rank 1 stops itself)
STOPPED = {
    "p2p": (["p2p", "--every-rank", "-b", "64K", "-n", "2", "--latency-iters", "5"],
            "pairs of hosts: round 1"),
    "allreduce": (["allreduce", "-b", "64K", "-n", "2"], "allreduce: timed trials"),
    "latency": (["latency", "-b", "64K", "-k", "10"], "latency: the small calls"),
    "flagsync": (["flagsync", "-n", "10"], "flagsync: all_reduce"),
    "demo": (["demo"], "demo: all_gather"),
    "info": (["info"], "info: gathering"),
    "doctor": (["doctor", "--no-nccl"], "doctor: every host's facts"),
}


CHATTER = """
import threading, time
from mpibench.launch import verdict
stop = threading.Event()
def rows():
    k = 0
    while not stop.is_set():
        verdict.out(f"row {k}")
        k += 1
main = threading.Thread(target=rows)
main.start()
time.sleep(0.2)
verdict.say(130, "demo")                 # as the watchdog's thread ends a job
verdict.say(1, "demo")                   # a second ending says nothing
time.sleep(0.2)
stop.set()
main.join()
"""


def test_verdict_is_the_last_line_while_another_thread_still_prints():
    """The watchdog's thread said the verdict while the main thread still printed a demo
    table (3 hosts, SIGINT on rank 1): the table came after it. Nothing follows it now."""
    done = subprocess.run([PYTHON, "-c", CHATTER], capture_output=True, text=True, cwd=ROOT,
                          env=base_env({}), timeout=60)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, show(done)
    assert verdict(done.stdout) == (130, "interrupted", "demo"), lines[-3:]
    assert len(lines) > 2 and lines[-2].startswith("row ") and "mpibench-verdict" not in lines[-2]


@pytest.fixture(scope="module")
def stopped_runs(procs):
    """Every command of STOPPED, three jobs at a time: each mostly waits out its timeout."""
    def one(command):
        args, step = STOPPED[command]
        return mpirun(2, [*args, "--timeout", "4"], env={"MPIBENCH_FAULT": f"stop:1:{step}"},
                      timeout=120)
    return dict(zip(STOPPED, at_once(one, STOPPED)))


@pytest.mark.parametrize("command", list(STOPPED))
def test_command_with_a_stopped_rank_ends_naming_it(command, stopped_runs):
    step = STOPPED[command][1]
    done = stopped_runs[command]
    assert done.returncode == 124, show(done)
    assert re.search(r"rank 1 \(host \S+\): no answer within \d+ s \(stopped, dead, or stuck\) in "
                     + re.escape(step), done.stderr), show(done)
    assert done.stderr.count("never arrived") == 1, show(done)
    assert verdict(done.stdout) == (124, "hang", command), show(done)


def test_timeout_means_the_same_in_every_multi_rank_command():
    helps = {}
    for command in ("run", "check", "train", *STOPPED):
        text = lone([command, "--help"]).stdout
        option = text.rsplit("--timeout SECONDS", 1)[1].split("\n  -", 1)[0]
        helps[command] = " ".join(option.split())
    for command, text in helps.items():
        assert "may take before the job is called hung" in text, (command, text)
        assert "exits 124" in text, (command, text)
        assert "process-group timeout" not in text, (command, text)


# ---- 3. input files are read on rank 0 only ----
@needs_hosts
def test_expect_file_seen_only_where_the_job_started(tmp_path):
    """The --expect file's folder is hidden (an empty tmpfs over it) on h2 and h3, as a
    login node's local path would be: rank 0 on h1 reads it, the others never try."""
    folder = tmp_path / "only-on-h1"
    folder.mkdir()
    expect = folder / "expect.json"
    expect.write_text(EXPECT_FAIL)
    script = (f'[ "$(hostname)" = h1 ] || mount -t tmpfs none "{folder}"; '
              f'test -e "{expect}" && where=sees || where=cannot; echo "$(hostname) $where" >&2; '
              f'exec {PYTHON} -m mpibench check -b 256K -n 2 -w 1 --expect "{expect}"')
    with fakecluster.FakeCluster(hosts=3, rates="1gbit") as c:
        done = c.mpirun(["/bin/sh", "-c", script], ppn=1, env=base_env(), timeout=150)
    assert {"h1 sees", "h2 cannot", "h3 cannot"} <= set(done.stderr.splitlines()), show(done)
    assert done.returncode == 1, show(done)
    assert f"threshold pair: min_busbw_GBps 50 (--expect {expect})" in done.stdout, show(done)
    assert mpibench_lines(done.stderr) == ["mpibench: check FAILED: 3 hosts failed: h[1-3]"]


UNREADABLE = [["check", "-b", "64K", "-n", "1", "-w", "0", "--expect", "{f}"],
              ["check", "-b", "64K", "-n", "1", "-w", "0", "--baseline", "{f}"],
              ["train", "--steps", "1", "--warmup", "0", "--scale-from", "{f}"]]


@pytest.fixture(scope="module")
def unreadable_runs(procs, tmp_path_factory):
    """(the input file, each job of UNREADABLE with rank 0 unable to read it), three at a time."""
    f = tmp_path_factory.mktemp("unreadable") / "input.json"
    f.write_text(EXPECT_FAIL)
    return f, at_once(lambda args: mpirun(2, [a.format(f=f) for a in args],
                                          env={"MPIBENCH_FAULT": "unreadable:0"}), UNREADABLE)


@pytest.mark.parametrize("case", range(len(UNREADABLE)),
                         ids=["check --expect", "check --baseline", "train --scale-from"])
def test_input_file_rank_0_cannot_read_is_one_line_and_exit_2(unreadable_runs, case):
    f, done = unreadable_runs[0], unreadable_runs[1][case]
    option = UNREADABLE[case][-2]
    lines = mpibench_lines(done.stderr)
    assert done.returncode == 2, show(done)
    assert lines == [f"mpibench: cannot read {option} {f}: Permission denied "
                     f"(test fault switch unreadable)"], show(done)
    assert (verdict(done.stdout) or ())[:2] == (2, "usage"), show(done)


def test_input_file_another_rank_cannot_read_is_not_read_there(tmp_path):
    f = tmp_path / "expect.json"
    f.write_text('{"intra": {"min_busbw_GBps": 0.000001}}')
    done = mpirun(2, ["check", "-b", "64K", "-n", "1", "-w", "0", "--expect", str(f)],
                  env={"MPIBENCH_FAULT": "unreadable:1"})
    assert done.returncode == 0, show(done)
    assert f"threshold intra: min_busbw_GBps 1e-06 (--expect {f})" in done.stdout, show(done)


# ---- 4. a reader that leaves early ----
TINY = ["run", "--collectives", "all_reduce", "-b", "8", "-e", "64K", "-n", "3", "-w", "1"]


@pytest.mark.parametrize("launch", ["mpirun.sh", "lone"])
def test_run_into_head_ends_quietly_with_exit_0_and_every_row_saved(launch, tmp_path):
    out = tmp_path / "r.json"
    start = ([str(Path(ROOT) / "launch" / "mpirun.sh"), "--np", "2", "--oversubscribe"]
             if launch == "mpirun.sh" else [PYTHON, "-m", "mpibench"])
    line = " ".join(f"'{a}'" for a in [*start, *TINY, "--json", str(out)])
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {line} | head -n 1"],
                          capture_output=True, text=True, timeout=180, cwd=ROOT,
                          env=base_env({"MPIBENCH_PYTHON": PYTHON}))
    assert done.returncode == 0, show(done)
    assert re.match(r"# mpibench version \S+ torch \S+ nccl-library=\S+\n$", done.stdout), show(done)
    assert "Traceback" not in done.stderr and "SIGPIPE" not in done.stderr, show(done)
    doc = json.loads(out.read_text())
    assert doc["complete"] and len(doc["results"]) == 14 and doc["exit"] == {"code": 0, "status": "ok"}


# ---- 6. doctor's exit code ----
@pytest.mark.parametrize("variable,code,words", [
    ("NCCL_SOCKET_IFNAME=nosuch0", 1, "ERROR NCCL_SOCKET_IFNAME=nosuch0 names no interface"),
    ("NCCL_P2P_DISABLE=1", 0, "NCCL_P2P_DISABLE=1 is set"),
])
def test_doctor_exits_1_on_a_problem_that_breaks_runs_and_0_on_warnings(variable, code, words,
                                                                         tmp_path):
    name, value = variable.split("=")
    js = tmp_path / "d.json"
    done = mpirun(2, ["doctor", "--no-nccl", "--json", str(js)], env={name: value})
    assert done.returncode == code, show(done)
    assert words in done.stdout, show(done)
    assert verdict(done.stdout) == (code, "failed" if code else "ok", "doctor"), show(done)
    found = json.loads(js.read_text())["doctor"]["findings"]
    mine = [f for f in found if name in f["text"]]
    assert mine and {f["severity"] for f in mine} == {"error" if code else "warning"}, found
    if code:
        assert mpibench_lines(done.stderr) == [
            "mpibench: doctor found 1 problem that breaks runs (ERROR above)"], show(done)


# ---- 7. test switches act only with MPIBENCH_TESTING=1, and always say they are set ----
ONE_ROW = ["run", "--collectives", "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1",
           "--probe-iters", "0"]


def _launcher_lines(text):
    """What stderr holds besides mpibench's own lines."""
    return [line for line in text.splitlines() if line.strip() and not mpibench_lines(line)]


@pytest.mark.parametrize("testing", ["0", "1"])
def test_fault_switch_acts_only_under_testing_and_is_announced(testing, tmp_path):
    """corrupt:1 left exported changes nothing without MPIBENCH_TESTING=1 and says so; with
    it the row is wrong, and the job ends with exit 1 and no line of the launcher's."""
    js = tmp_path / "r.json"
    done = mpirun(2, [*ONE_ROW, "--json", str(js)],
                  env={"MPIBENCH_FAULT": "corrupt:1", "MPIBENCH_TESTING": testing})
    doc = json.loads(js.read_text())
    on = testing == "1"
    assert done.returncode == (1 if on else 0), show(done)
    assert ("# TEST SWITCHES ACTIVE: MPIBENCH_FAULT=corrupt:1\n" if on else
            "# TEST SWITCHES SET BUT IGNORED: MPIBENCH_FAULT=corrupt:1 (MPIBENCH_TESTING is not "
            "1)\n") in done.stdout, show(done)
    assert doc["test_switches"] == {"MPIBENCH_FAULT": "corrupt:1", "active": on}
    assert bool(sum(r[m]["nwrong"] for r in doc["results"] for m in ("out_of_place", "in_place")
                    if r[m])) == on, doc["results"]
    assert verdict(done.stdout)[:2] == ((1, "failed") if on else (0, "ok")), show(done)
    assert _launcher_lines(done.stderr) == [] and "\0" not in done.stderr, show(done)


def test_every_rank_failing_gives_one_verdict_and_two_launcher_lines_at_most():
    """Every rank raises (crash on all): the lowest reports, once; launch/mpirun.sh leaves at
    most two lines of the launcher's, and no NUL byte."""
    done = subprocess.run([str(Path(ROOT) / "launch" / "mpirun.sh"), "--np", "3", "--oversubscribe",
                           *ONE_ROW], capture_output=True,
                          text=True, timeout=180, cwd=ROOT, env=base_env(
                              {"MPIBENCH_PYTHON": PYTHON,
                               "MPIBENCH_FAULT": "crash:0:1K,crash:1:1K,crash:2:1K"}))
    assert done.returncode == 1, show(done)
    assert done.stdout.count("mpibench-verdict:") == 1, show(done)
    assert verdict(done.stdout) == (1, "error", "run"), show(done)
    assert len(_launcher_lines(done.stderr)) <= 2, show(done)
    assert "\0" not in done.stderr + done.stdout, show(done)


# ---- 5. a rank that raises inside its timed loop: one verdict, naming it alone ----
LOOP_ROW = ["run", "-b", "1K", "-e", "1K", "-n", "20", "-w", "1", "-d", "float32"]


def check_failed_in_loop(done, js, rank, host):
    """rank failed at its third timed call: exactly one verdict (1, error), one line naming
    the rank, its host and its error; no live rank named dead nor a signal's second verdict;
    the results file records 1."""
    said = show(done)
    assert done.returncode == 1, said
    assert done.stdout.count("mpibench-verdict:") == 1, said
    assert verdict(done.stdout) == (1, "error", "run"), said
    failed = [line for line in mpibench_lines(done.stderr) if " failed: " in line]
    assert failed == [f"mpibench: rank {rank} (host {host}) failed: RuntimeError: test fault switch "
                      f"MPIBENCH_FAULT=loopcrash made this rank fail inside its timed loop"], said
    assert "no longer answer" not in done.stderr and "stopped by SIG" not in done.stdout, said
    doc = json.loads(js.read_text())
    assert doc["exit"] == {"code": 1, "status": "error"}, doc.get("exit")
    assert doc["complete"] is False and f"rank {rank} (host {host}) failed" in doc["incomplete"]


def test_rank_failing_in_its_timed_loop_is_the_one_verdict(tmp_path):
    """3 ranks, rank 1 raises at its third timed call while the others wait in the loop:
    before, rank 1 named them dead (their watchdogs did not answer inside a timed loop) and
    rank 0 took the launcher's SIGTERM for a new end (a second verdict, 143 in the file)."""
    js = tmp_path / "r.json"
    done = mpirun(3, [*LOOP_ROW, "--json", str(js)], env={"MPIBENCH_FAULT": "loopcrash:1:3"},
                  timeout=120)
    assert "# TEST SWITCHES ACTIVE: MPIBENCH_FAULT=loopcrash:1:3" in done.stdout, show(done)
    check_failed_in_loop(done, js, 1, socket.gethostname())


@needs_hosts
def test_rank_failing_in_its_timed_loop_across_two_hosts(tmp_path):
    """The same on 2 namespace hosts, 2 ranks each: rank 2 (host h2) fails."""
    js = tmp_path / "r.json"
    with fakecluster.FakeCluster(hosts=2, rates="1gbit") as c:
        done = c.mpirun([PYTHON, "-m", "mpibench", *LOOP_ROW, "--json", str(js)], ppn=2,
                        env=base_env({"MPIBENCH_FAULT": "loopcrash:2:3"}), timeout=150)
    check_failed_in_loop(done, js, 2, "h2")


# ---- 6. MPI without MPI_THREAD_MULTIPLE: the watchdog watches alone, and says so ----
def test_mpi_without_thread_multiple_is_said_once_and_hangs_name_no_one_else():
    """serialized:R makes rank R's MPI grant THREAD_SERIALIZED (Cray MPICH's default): one
    line says what is lost, a run still ends 0, and a hang ends 124 naming no other rank."""
    ok, hung = at_once(lambda case: mpirun(2, *case, timeout=120), [
        (["demo"], {"MPIBENCH_FAULT": "serialized:0,serialized:1"}),
        (["demo", "--timeout", "4"],
         {"MPIBENCH_FAULT": "serialized:0,serialized:1,stop:1:demo: all_gather"})])
    said = [line for line in mpibench_lines(ok.stderr) if "MPI granted" in line]
    assert said == ["mpibench: MPI granted MPI_THREAD_SERIALIZED, not MPI_THREAD_MULTIPLE: the "
                    "hang watchdog cannot ask the other ranks where they are, so a hang names only "
                    "the step of the rank that saw it (Cray MPICH: export "
                    "MPICH_MAX_THREAD_SAFETY=multiple)"], show(ok)
    assert ok.returncode == 0 and verdict(ok.stdout) == (0, "ok", "demo"), show(ok)
    assert hung.returncode == 124 and verdict(hung.stdout) == (124, "hang", "demo"), show(hung)
    assert "the other ranks could not be asked" in hung.stderr, show(hung)
    assert "no answer within" not in hung.stderr and "never arrived" not in hung.stderr, show(hung)

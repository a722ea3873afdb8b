"""Faults under a real mpirun (gloo, 2-3 ranks): hangs, deaths, signals, mismatched
ranks, out of memory, result files. Each job must end within a loose bound after the
fault; leftovers are always killed (by pid)."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mpibench import resultsfile
from mpibench.errors import UsageError
from mpibench.results import document
from conftest import at_once, switches_honoured

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MPIRUN = str(Path(PY).parent / "mpirun")
ROOTFLAGS = ["--allow-run-as-root"] if os.geteuid() == 0 else []
START = 180          # seconds a loaded machine may take to start a job (import torch x ranks)
SLACK = 25           # seconds beyond the expected end that still pass
ROW = re.compile(r"^\s+\d+\s+\d+\s+\w+")
PID = re.compile(r"#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+(\d+)")
# Long enough after its first row (8 rows) that a signal sent then lands mid-run even when
# mpirun is slow to forward it on a loaded machine.
SLOW = ["--collectives", "all_reduce", "-b", "8", "-e", "1K", "-n", "300", "-w", "1",
        "--probe-iters", "0"]


class Job:
    """mpirun (or a lone python) in its own session; stdout lines with their arrival times."""

    def __init__(self, args, np=2, env=None, cmd=None, umask=None):
        full_env = dict(os.environ)
        full_env.pop("MPIBENCH_FAULT", None)
        full_env.update(env or {})
        switches_honoured(full_env)
        if cmd is None:
            cmd = [MPIRUN, *ROOTFLAGS, "--oversubscribe", "-np", str(np),
                   PY, "-m", "mpibench", *args]
        preexec = (lambda: os.umask(umask)) if umask is not None else None
        self.p = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True,
                                  preexec_fn=preexec)
        self.lines, self.err = [], []
        self.pids = {}
        self._readers = [threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True),
                         threading.Thread(target=self._read, args=(self.p.stderr, self.err), daemon=True)]
        for t in self._readers:
            t.start()

    def _read(self, stream, into):
        for line in stream:
            into.append((time.monotonic(), line.rstrip("\n")))
            m = PID.match(line)
            if m:
                self.pids[int(m.group(1))] = int(m.group(2))

    @property
    def out(self):
        return "\n".join(text for _, text in self.lines)

    @property
    def stderr(self):
        return "\n".join(text for _, text in self.err)

    def wait_row(self, timeout=START):
        """Time the first result row appeared."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for t, line in list(self.lines):
                if ROW.match(line):
                    return t
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"no result row appeared\nstdout:\n{self.out}\nstderr:\n{self.stderr}")

    def end(self, within):
        """Exit code; fails (after killing everything) if the job is alive after `within` s."""
        try:
            rc = self.p.wait(timeout=within)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"job still alive {within:.0f} s later\nstdout:\n{self.out}\n"
                        f"stderr:\n{self.stderr}")
        for t in self._readers:
            t.join(timeout=5)
        self.kill()
        return rc

    def kill(self):
        for pid in [self.p.pid, *self.pids.values()]:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.p.wait(timeout=30)


@pytest.fixture
def job():
    started = []

    def start(*a, **kw):
        started.append(Job(*a, **kw))
        return started[-1]
    yield start
    for j in started:
        j.kill()


def rows_in(path):
    doc = resultsfile.load(path)
    return doc, [r["size"] for r in doc["results"]]


# ---- 1. hangs ----
VICTIMS = (1, 0)      # the rank SIGSTOPped


@pytest.fixture(scope="module")
def hung_jobs(procs, tmp_path_factory):
    """{"hang" or a stopped rank: (its job, exit code, seconds from its last row (hang) or
    the stop to its end, its results file)}: the three jobs at once, as each mostly waits
    out its timeout."""
    def one(case):
        out = tmp_path_factory.mktemp(f"hung{case}") / "r.json"
        if case == "hang":
            j = Job(["--collectives", "all_reduce", "-e", "4K", "--timeout", "4", "--json",
                     str(out), "--probe-iters", "0"], np=3, env={"MPIBENCH_FAULT": "hang:1:1K"})
        else:
            j = Job([*SLOW, "--timeout", "6", "--json", str(out)], np=2)
        try:
            j.wait_row()
            if case == "hang":
                rc = j.end(START)
                since = max(t for t, text in j.lines if ROW.match(text))
            else:
                since = time.monotonic()
                os.kill(j.pids[case], signal.SIGSTOP)
                rc = j.end(6 + 2 + SLACK)
            return j, rc, time.monotonic() - since, out
        finally:
            j.kill()
    cases = ("hang", *VICTIMS)
    return dict(zip(cases, at_once(one, cases)))


def test_hanging_rank_is_named_and_results_kept(hung_jobs):
    j, rc, seconds, out = hung_jobs["hang"]
    assert rc == 124, j.stderr
    err = j.stderr
    assert "1 rank never arrived" in err
    assert re.search(r"rank 1 \(host \S+\): alive but still at all_reduce 1 KiB", err), err
    assert err.count("never arrived") == 1, err          # reported once
    assert j.p.returncode is not None
    doc, sizes = rows_in(out)
    assert not doc["complete"] and doc["incomplete"].startswith("timed out")
    assert sizes == [8, 16, 32, 64, 128, 256, 512]
    assert seconds < 4 + 10 + SLACK


@pytest.mark.parametrize("victim", VICTIMS)
def test_stopped_rank_is_named(hung_jobs, victim):
    j, rc, seconds, out = hung_jobs[victim]
    assert rc == 124, j.stderr
    assert re.search(rf"rank {victim} \(host \S+\): no answer within", j.stderr), j.stderr
    assert j.stderr.count("never arrived") == 1, j.stderr
    assert seconds < 6 + 2 + SLACK
    doc, sizes = rows_in(out)
    assert not doc["complete"] and sizes
    if victim == 0:
        assert "rank 0 did not answer" in j.stderr
    else:
        assert doc["incomplete"].startswith("timed out")


# ---- 2. a rank dies ----
@pytest.mark.parametrize("kind", ["die", "crash"])
@pytest.mark.usefixtures("procs")
def test_dead_rank_ends_job_and_keeps_rows(job, tmp_path, kind):
    out = tmp_path / "r.json"
    j = job(["--collectives", "all_reduce", "-e", "4K", "--json", str(out), "--probe-iters", "0"],
            np=2, env={"MPIBENCH_FAULT": f"{kind}:1:1K"})
    j.wait_row()
    rc = j.end(SLACK + 20)
    assert rc != 0
    if kind == "crash":
        assert rc == 1
        assert len(re.findall(r"rank 1 \(host \S+\) failed: RuntimeError", j.stderr)) == 1, j.stderr
    else:
        # mpirun names the rank and host; a rank that saw it go names it too (if still alive)
        assert re.search(r"rank 1 with PID \d+ on node \S+ exited on\s+signal 9", j.stderr), j.stderr
    doc, sizes = rows_in(out)
    assert not doc["complete"]
    assert sizes == [8, 16, 32, 64, 128, 256, 512]


# ---- 3. out of memory at a size ----
@pytest.mark.usefixtures("procs")
def test_out_of_memory_skips_that_size_and_larger(job, tmp_path):
    out = tmp_path / "r.json"
    j = job(["--collectives", "all_reduce", "-b", "8K", "-e", "256K", "--json", str(out)],
            np=2, env={"MPIBENCH_FAULT": "oom:1:64K"})
    rc = j.end(START)
    assert rc == 0, j.stderr
    skips = [text for _, text in j.lines if text.startswith("# out of memory")]
    assert [s.split()[5:7] for s in skips] == [["256", "KiB"], ["128", "KiB"], ["64", "KiB"]]
    assert all("on rank 1 (host" in s for s in skips)
    doc, sizes = rows_in(out)
    assert doc["complete"] and sizes == [8192, 16384, 32768]
    assert doc["skipped_sizes"] == [262144, 131072, 65536]


# ---- 4. signals ----
@pytest.mark.usefixtures("procs")
def test_ctrl_c_to_mpirun_keeps_results(job, tmp_path):
    sig = signal.SIGINT
    out = tmp_path / "r.json"
    j = job([*SLOW, "--json", str(out)], np=2)
    j.wait_row()
    sent = time.monotonic()
    j.p.send_signal(sig)
    rc = j.end(SLACK)
    assert rc != 0
    assert time.monotonic() - sent < SLACK
    assert "Traceback" not in j.stderr
    doc, sizes = rows_in(out)
    assert not doc["complete"] and sizes
    assert doc["incomplete"].startswith("stopped by SIGTERM")   # mpirun forwards SIGTERM


@pytest.mark.parametrize("victim,sig", [(0, signal.SIGTERM), (1, signal.SIGINT), (None, signal.SIGINT)])
@pytest.mark.usefixtures("procs")
def test_signal_to_one_rank_ends_job(job, tmp_path, victim, sig):
    out = tmp_path / "r.json"
    if victim is None:       # a lone process (no launcher): Ctrl-C
        j = job([], cmd=[PY, "-m", "mpibench", *SLOW, "--json", str(out)])
        j.wait_row()
        pid = j.p.pid
    else:
        j = job([*SLOW, "--json", str(out)], np=2)
        j.wait_row()
        pid = j.pids[victim]
    os.kill(pid, sig)
    rc = j.end(SLACK)
    assert rc == 128 + sig, j.stderr
    name = signal.Signals(sig).name
    closing = [text for _, text in j.lines if text.startswith(f"# stopped by {name}")]
    assert len(closing) == 1, j.out
    assert "marked incomplete" in closing[0]
    assert "Traceback" not in j.stderr
    doc, sizes = rows_in(out)
    assert not doc["complete"] and sizes and name in doc["incomplete"]


# ---- 5. mismatched ranks ----
@pytest.mark.usefixtures("procs")
def test_ranks_started_differently_are_refused(job):
    cmd = [MPIRUN, *ROOTFLAGS, "--oversubscribe", "-np", "1", PY, "-m", "mpibench", "run", "-n", "3",
           ":", "-np", "1", PY, "-m", "mpibench", "run", "-n", "4"]
    j = job([], cmd=cmd)
    rc = j.end(START)
    assert rc == 2, j.stderr
    lines = [text for text in j.stderr.splitlines() if text.startswith("mpibench:")]
    assert len(lines) == 1, j.stderr
    assert "rank 0 (host" in lines[0] and "'run -n 3'" in lines[0]
    assert "rank 1 (host" in lines[0] and "'run -n 4'" in lines[0]
    assert not any(ROW.match(text) for _, text in j.lines)


# ---- 6. files ----
@pytest.mark.usefixtures("procs")
def test_unwritable_path_refused_before_benchmark(job, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    j = job(["--json", str(blocker / "r.json")], np=2)
    rc = j.end(START)
    assert rc == 2
    lines = [text for text in j.stderr.splitlines() if text.startswith("mpibench:")]
    assert len(lines) == 1 and "is not a folder" in lines[0], j.stderr
    assert "Using devices" not in j.out


@pytest.mark.parametrize("umask,mode", [(0o077, 0o600), (0o022, 0o644)])
@pytest.mark.usefixtures("procs")
def test_result_files_follow_umask_and_leave_no_temporaries(job, tmp_path, umask, mode):
    out = tmp_path / "r.json"
    csv = tmp_path / "r.csv"
    j = job([], cmd=[PY, "-m", "mpibench", "--collectives", "all_reduce", "-e", "64", "-n", "2",
                     "--json", str(out), "--csv", str(csv)], umask=umask)
    assert j.end(START) == 0, j.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert stat.S_IMODE(csv.stat().st_mode) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.json"]
    doc = resultsfile.load(out)
    assert doc["complete"] and len(list(resultsfile.measurements(doc))) == 4


# ---- 7. security ----
def test_no_shell_strings_in_the_code():
    bad = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|commands\.getoutput|\beval\(|\bexec\(")
    hits = [f"{p}:{n}" for p in (ROOT / "mpibench").rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1) if bad.search(line)]
    assert hits == []


GOOD = {"version": 1, "tool": "mpibench", "mpibench_version": "0.1.0", "complete": True,
        "start_time": "t", "end_time": None, "results": [
            {"collective": "all_reduce", "size": 8, "count": 2, "type": "float", "redop": "sum",
             "root": -1, "out_of_place": None,
             "in_place": {"time_us": 10.0, "algbw_GBps": 0.1, "busbw_GBps": None, "nwrong": 0},
             "per_rank_time_us": {"in_place": [9.0, 11.0]}}]}


def _write(tmp_path, text):
    p = tmp_path / "x.json"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _with(**changes):
    doc = json.loads(json.dumps(GOOD))
    row = doc["results"][0]
    for key, value in changes.items():
        target = row if key in row or key in ("size",) else doc
        target[key] = value
    return doc


@pytest.mark.parametrize("text,problem", [
    ("", "not JSON"),
    ("hello", "not JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    ("[1, 2]", "top level is a list"),
    ('{"tool": "other"}', "not an mpibench results file"),
    (json.dumps(_with(version=7)), "format version 7"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "results"}), "missing 'results'"),
    (json.dumps(_with(results={})), "results: dict"),
    (json.dumps(_with(size=-8)), "out of range"),
    (json.dumps(_with(size=1 << 60)), "out of range"),
    (json.dumps(_with(size="8")), "expected integer"),
    (json.dumps(_with(size=True)), "expected integer"),
    (json.dumps(GOOD).replace('"time_us": 10.0', '"time_us": NaN'), "NaN"),
    (json.dumps(GOOD).replace('"time_us": 10.0', '"time_us": Infinity'), "Infinity"),
    (json.dumps(GOOD).replace('"time_us": 10.0', '"time_us": 1e999'), "out of range"),
    (json.dumps(GOOD).replace('"size": 8', '"size": ' + "9" * 5000), "not a results file"),
    (json.dumps(GOOD).replace('"count": 2', '"count": 2, "count": 3'), "appears twice"),
    ('{"a": ' + "[" * 100000 + "]" * 100000 + "}", "nested deeper"),
    (json.dumps(_with(in_place=None)), "neither out_of_place nor in_place"),
    (json.dumps(_with(per_rank_time_us={"in_place": ["x"]})), "per_rank_time_us.in_place[0]: str, expected"),
])
def test_hostile_results_files_are_refused(tmp_path, text, problem):
    path = _write(tmp_path, text)
    with pytest.raises(UsageError) as exc:
        resultsfile.load(path)
    assert str(path) in str(exc.value) and problem in str(exc.value), str(exc.value)
    assert exc.value.code == 2


def test_huge_and_missing_results_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(document, "MAX_BYTES", 1000)
    path = _write(tmp_path, json.dumps(GOOD) + " " * 1000)
    with pytest.raises(UsageError, match="over the"):
        resultsfile.load(path)
    with pytest.raises(UsageError, match="cannot read results file"):
        resultsfile.load(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="cannot read results file"):
        resultsfile.load(tmp_path)


def test_valid_results_file_loads(tmp_path):
    doc = resultsfile.load(_write(tmp_path, json.dumps(GOOD)))
    assert [(r["size"], mode) for r, mode, _ in resultsfile.measurements(doc)] == [(8, "in_place")]

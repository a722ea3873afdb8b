"""-z 0-3 as nccl-tests 2.19.6 means them, under a real mpirun on gloo and on MPI itself.

Each job runs one -z mode on both backends (--backend gloo,mpi) with the loop trace on
(MPIBENCH_TRACE_LOOPS=1): every rank reports, per timed loop, the calls it made, the
side-channel barriers inside the loop, the most calls in flight at once and how many
launches found a call on overlapping memory still in flight. The 3-rank jobs time every
iteration (-I 1), so both kinds of loop are traced. Times are never asserted, only how
the per-iteration figures relate to each other and to the row's time.
"""
import json
import re
import statistics

import pytest
import torch

from conftest import at_once, mpirun, show
from mpibench.measure import looptrace
from mpibench.measure.backends import timing

pytestmark = pytest.mark.timeout(300)

ITERS = 3
ARGS = ["run", "--backend", "gloo,mpi", "--collectives", "all_reduce,all_gather,gather,scatter",
        "-b", "64", "-e", "4K", "-f", "64", "-n", str(ITERS), "-w", "1", "-c", "1",
        "--probe-iters", "0", "--link-iters", "0", "-r", "1"]
JOBS = [(np, z) for np in (2, 3) for z in (0, 1, 2, 3)]
TRACE = re.compile(r"^looptrace rank (\d+): (\S+) (\d+) \S+ \S+ (\S+) z(\d) window (\d+): calls (\d+) "
                   r"barriers (\d+) most-in-flight (\d+) sharing (\d+)$", re.M)


@pytest.fixture(scope="module")
def jobs(procs, tmp_path_factory):
    """{(np, z): (done, doc, traces)}; three jobs at a time (each mostly waits for torch)."""
    def one(job):
        np, z = job
        path = tmp_path_factory.mktemp(f"z{z}np{np}") / "run.json"
        per_iter = ["-I", "1", "-K", "1"] if np == 3 else []
        done = mpirun(np, ARGS + per_iter + ["-z", str(z), "--json", str(path)],
                      env={"MPIBENCH_TRACE_LOOPS": "1"}, timeout=240)
        assert done.returncode == 0, show(done)
        return done, json.loads(path.read_text()), TRACE.findall(done.stderr)
    return dict(zip(JOBS, at_once(one, JOBS)))


@pytest.mark.parametrize("np, z", JOBS)
def test_mode_runs_checked_and_recorded(jobs, np, z):
    done, doc, _ = jobs[(np, z)]
    assert doc["config"]["blocking"] == {"gloo": z, "mpi": z}
    assert set(doc["config"]["blocking_mode"]) == {"gloo", "mpi"}
    assert all(text.startswith(timing.BLOCKING[z]) for text in doc["config"]["blocking_mode"].values())
    assert f"# -z {z} (gloo): {timing.BLOCKING[z]}" in done.stdout, show(done)
    rows = doc["results"]
    assert {(r["backend"], r["collective"]) for r in rows} == {
        (b, c) for b in ("gloo", "mpi") for c in ("all_reduce", "all_gather", "gather", "scatter")}
    measured = [r[m] for r in rows for m in ("out_of_place", "in_place") if r[m]]
    assert measured and all(m["nwrong"] == 0 and m["time_us"] > 0 for m in measured)
    assert doc["out_of_bounds"]["count"] == 0


@pytest.mark.parametrize("np, z", JOBS)
def test_barriers_and_calls_in_flight(jobs, np, z):
    done, doc, traces = jobs[(np, z)]
    loops = sum(1 for r in doc["results"] for m in ("out_of_place", "in_place") if r[m])
    assert len(traces) == np * loops, show(done)        # every rank, every timed loop
    assert {int(t[0]) for t in traces} == set(range(np))
    for _rank, _coll, _count, _mode, zz, window, calls, barriers, most, sharing in traces:
        assert int(zz) == z and int(calls) == ITERS
        # nccl-tests: -z 1 and -z 3 barrier after every timed iteration, -z 0 and -z 2 never
        assert int(barriers) == (ITERS if z in (1, 3) else 0)
        assert int(sharing) == 0            # never two calls in flight on the same memory
        assert int(most) == (min(int(window), ITERS) if z == 0 else 1)
    if z == 0:      # the small rows have a slot per iteration: the calls do overlap there
        assert max(int(t[8]) for t in traces) == ITERS
        assert min(int(t[8]) for t in traces) == 1     # 4 KiB rows: one slot, one at a time
        in_flight = {m["in_flight"] for r in doc["results"] for m in (r["out_of_place"], r["in_place"]) if m}
        assert in_flight == {1, ITERS}


@pytest.mark.parametrize("np, z", JOBS)
def test_per_iteration_times(jobs, np, z):
    """-I 1 (3 ranks): every row and mode carries nccl-tests' per-iteration object, each
    iteration's time the slowest rank's, its stats those of the times after -K; a rank's
    iterations add up to no more than its loop's time. Without -I no such object."""
    done, doc, _ = jobs[(np, z)]
    measured = [(r, key) for r in doc["results"] for key in ("out_of_place", "in_place") if r[key]]
    if np == 2:
        assert all("per_iter" not in r[key] for r, key in measured)
        assert "i_min" not in done.stdout and doc["config"]["per_iter_timing"] == 0
        return
    assert doc["config"]["per_iter_timing"] == 1 and doc["config"]["per_iter_skip"] == 1
    assert "i_min" in done.stdout and "# per-iteration report: host clock" in done.stdout
    for r, key in measured:
        p = r[key]["per_iter"]
        times, ranks = p["times_us"], p["per_process_max_times_us"]
        assert len(times) == ITERS and p["skipped_iterations"] == 1
        assert len(ranks) == np and all(len(t) == ITERS for t in ranks)
        assert times == [max(col) for col in zip(*ranks)]
        assert all(t >= 0 for rank in ranks for t in rank) and min(times) > 0
        kept = times[1:]
        assert p["min_us"] == min(kept) and p["max_us"] == max(kept)
        assert p["avg_us"] == pytest.approx(statistics.fmean(kept))
        assert p["stdev_us"] == pytest.approx(statistics.pstdev(kept), abs=1e-9)
        assert p["cv_pct"] == pytest.approx(p["stdev_us"] / p["avg_us"] * 100)
        for rank, loop_us in zip(ranks, r["per_rank_time_us"][key]):
            # the marks lie inside the loop's clock reads (-z 3: inside each call's)
            assert 0 < sum(rank) <= loop_us * ITERS * (1 + 1e-9)


# ---- pure logic: the window and the trace can tell a bad schedule ----

class FakeHandle:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def wait(self):
        self.log.append(("wait", self.i))


def test_windowed_loop_never_exceeds_its_window():
    for n, window in [(7, 1), (7, 3), (3, 5), (10, 10)]:
        log, live, most = [], set(), 0

        def make(i, log=log):
            def call():
                log.append(("launch", i))
                return FakeHandle(log, i)
            return call
        timing.seconds([make(i) for i in range(n)], 0, wait=lambda h: h.wait(), window=window)
        for what, i in log:
            if what == "launch":
                live.add(i)
                most = max(most, len(live))
            else:
                live.remove(i)
        assert not live and most == min(window, n)
        assert [i for what, i in log if what == "launch"] == list(range(n))


@pytest.mark.parametrize("z", [0, 1, 2, 3])
def test_marked_loops_mark_every_boundary(z):
    """-I 1's loops: one mark before each iteration and after the last (-z 3: one on each
    side of each call, the barrier outside); with calls in flight, after each wait."""
    n, window = 5, 2
    log = []

    def make(i):
        def call():
            log.append(("launch", i))
            return FakeHandle(log, i) if z == 0 else None
        return call
    marks = [(lambda j=j: log.append(("mark", j)) or j) for j in range(timing.marks_needed(n, z))]
    total, stamps = timing.seconds_marked(
        [make(i) for i in range(n)], z, marks, finish=lambda: log.append(("finish",)),
        barrier=lambda: log.append(("barrier",)),
        wait=(lambda h: h.wait()) if z == 0 else None, window=window)
    assert stamps == list(range(len(marks))) and total > 0
    seq = [e for e in log if e[0] != "finish"]
    if z == 0:       # mark j+1 right after call j is seen complete, calls in order
        assert [e for e in seq if e[0] != "launch"] == \
            [("mark", 0)] + [x for i in range(n) for x in (("wait", i), ("mark", i + 1))]
        assert [i for what, i in log if what == "launch"] == list(range(n))
    elif z == 3:
        assert seq == [x for i in range(n) for x in
                       (("mark", 2 * i), ("launch", i), ("mark", 2 * i + 1), ("barrier",))]
    else:
        each = [("launch",)] if z == 2 else [("launch",), ("barrier",)]
        assert seq == [x for i in range(n) for x in
                       [("mark", i)] + [(e[0], i) if e[0] == "launch" else e for e in each]] + [("mark", n)]
    assert len(timing.intervals([0.0, 1.0, 3.0, 6.0], 1)) == 3
    assert timing.intervals([0.0, 1.0, 3.0, 6.0], 3) == [1.0, 3.0]


def test_trace_counts_calls_sharing_memory():
    buf = torch.zeros(64)
    views = [(buf[0:16], buf[16:32]), (buf[32:48], buf[48:64])]
    assert not looptrace.overlap(looptrace.spans(views[0]), looptrace.spans(views[1]))
    for window, shared in [(2, 0), (3, 2)]:
        trace = looptrace.Trace(barrier=lambda: None)
        calls = trace.calls([lambda: FakeHandle([], 0)] * 4, views)
        timing.seconds(calls, 0, wait=lambda h: h.wait(), window=window)
        assert trace.sharing == shared and trace.calls_made == 4 and not trace.live


def test_watchdog_leaves_the_side_channel_alone_in_the_timed_loop():
    """In the timed loop the thread only looks at its deadline until the loop has lasted
    LOOP_SERVE seconds, then serves once per LOOP_SERVE; the mark that ends the loop wakes it
    to serve at once."""
    import time
    from types import SimpleNamespace
    from mpibench.launch import watchdog
    session = SimpleNamespace(comm=SimpleNamespace(kind="none"), rank=0, size=1, hosts=["h"],
                              hostname="h")
    w = watchdog.Watchdog(session, timeout=60)
    served = []
    w._serve = lambda: served.append(time.monotonic())
    try:
        w.arm("row")
        w.mark(watchdog.TIMED_LOOP)
        marked = time.monotonic()
        time.sleep(watchdog.LOOP_SERVE + 3 * watchdog.IDLE_POLL)
        # a serve already past its look at the phase may land just after the mark
        quiet = [t for t in served if marked + watchdog.IDLE_POLL < t < marked + watchdog.LOOP_SERVE]
        assert not quiet and w._owed                  # nothing served in the loop's first second
        assert any(t >= marked + watchdog.LOOP_SERVE for t in served)   # then once a second
        left = time.monotonic()
        w.mark("check")
        time.sleep(watchdog.IDLE_POLL / 2)
        assert served and served[-1] >= left          # woken at once, not at the next poll
    finally:
        w.close()


def test_nccl_communicator_is_created_at_init():
    """NCCL gets init_process_group(device_id=...) where torch takes it, so its communicator
    exists before the first timed row or CUDA graph capture; gloo gets nothing extra."""
    from types import SimpleNamespace
    from mpibench.launch import bootstrap
    gpu = SimpleNamespace(device=torch.device("cuda", 0))
    assert bootstrap._eager(gpu, "nccl") == {"device_id": torch.device("cuda", 0)}
    assert bootstrap._eager(gpu, "gloo") == {}
    assert bootstrap._eager(SimpleNamespace(device=None), "nccl") == {}

"""-z 0-3 as nccl-tests 2.19.6 means them, under a real mpirun on gloo and on MPI itself.

Each job runs one -z mode on both backends (--backend gloo,mpi) with the loop trace on
(MPIBENCH_TRACE_LOOPS=1): every rank reports, per timed loop, the calls it made, the
side-channel barriers inside the loop, the most calls in flight at once and how many
launches found a call on overlapping memory still in flight. Times are never asserted.
"""
import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import mpirun, show
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
def jobs(tmp_path_factory):
    """{(np, z): (done, doc, traces)}; three jobs at a time (each mostly waits for torch)."""
    def one(job):
        np, z = job
        path = tmp_path_factory.mktemp(f"z{z}np{np}") / "run.json"
        done = mpirun(np, ARGS + ["-z", str(z), "--json", str(path)],
                      env={"MPIBENCH_TRACE_LOOPS": "1"}, timeout=240)
        assert done.returncode == 0, show(done)
        return done, json.loads(path.read_text()), TRACE.findall(done.stderr)
    with ThreadPoolExecutor(3) as pool:
        return dict(zip(JOBS, pool.map(one, JOBS)))


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
    for rank, coll, count, mode, zz, window, calls, barriers, most, sharing in traces:
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


# ---- pure logic: the window and the trace can tell a bad schedule ----

class FakeHandle:
    def __init__(self, log, i):
        self.log, self.i = log, i

    def wait(self):
        self.log.append(("wait", self.i))


def test_windowed_loop_never_exceeds_its_window():
    for n, window in [(7, 1), (7, 3), (3, 5), (10, 10)]:
        log, live, most = [], set(), 0

        def make(i):
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
    """In the timed loop the thread only looks at its deadline; the mark that ends the loop
    wakes it to serve at once."""
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
        time.sleep(0.1 + 3 * watchdog.IDLE_POLL)
        start = len(served)
        time.sleep(3 * watchdog.IDLE_POLL)
        assert len(served) == start and w._owed      # nothing served while the loop ran
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
    import torch.distributed as dist
    from mpibench.launch import bootstrap
    gpu = SimpleNamespace(device=torch.device("cuda", 0))
    assert bootstrap._eager(dist, gpu, "nccl") == {"device_id": torch.device("cuda", 0)}
    assert bootstrap._eager(dist, gpu, "gloo") == {}
    assert bootstrap._eager(dist, SimpleNamespace(device=None), "nccl") == {}

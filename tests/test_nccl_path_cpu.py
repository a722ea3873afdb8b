"""What of the NCCL path can be checked without a GPU: the torch API it calls exists with the
arguments it passes (an upgrade that renames one fails here, in CI), the row deadline counts
-G's replays, the memory line reports device memory, the room left for NCCL's own buffers,
and the TORCH_NCCL_BLOCKING_WAIT note."""
import inspect
import os
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from mpibench.commands import run
from mpibench.measure.dtypes import DTYPES
from mpibench.measure.collectives import REGISTRY
from mpibench.measure.engine import GIB, Plan, calls_per_row, nccl_reserve, reserve_room
from mpibench.results import runtext


def _params(fn):
    return inspect.signature(fn).parameters


# (callable, the arguments mpibench passes by name)
API = [
    (torch.cuda.graph.__init__, ["stream", "capture_error_mode"]),
    (torch.cuda.CUDAGraph.replay, []),
    (torch.cuda.Event.__new__, ["enable_timing"]),
    (torch.cuda.Event.record, ["stream"]),
    (torch.cuda.Event.elapsed_time, ["end_event"]),
    (torch.cuda.Event.synchronize, []),
    (torch.cuda.Stream.__new__, ["device"]),
    (torch.cuda.Stream.synchronize, []),
    (torch.cuda.set_stream, ["stream"]),
    (torch.cuda.synchronize, ["device"]),
    (torch.cuda.set_device, ["device"]),
    (torch.cuda.max_memory_allocated, ["device"]),
    (torch.cuda.reset_peak_memory_stats, ["device"]),
    (torch.cuda.get_device_properties, ["device"]),
    (torch.cuda.device_count, []),
    (torch.cuda.MemPool.__init__, ["allocator"]),
    (torch.cuda.use_mem_pool, ["pool", "device"]),
    (dist.distributed_c10d._get_default_group, []),
    (torch.cuda.nccl.version, []),
    (dist.init_process_group, ["backend", "store", "rank", "world_size", "timeout", "device_id"]),
    (dist.is_nccl_available, []),
    (dist.all_reduce, ["op", "group", "async_op"]),
    (dist.all_gather_into_tensor, ["output_tensor", "input_tensor", "group", "async_op"]),
    (dist.reduce_scatter_tensor, ["output", "input", "op", "group", "async_op"]),
    (dist.batch_isend_irecv, ["p2p_op_list"]),
    (dist.P2POp.__init__, ["op", "tensor", "peer", "group"]),
    (dist.new_group, ["ranks", "use_local_synchronization"]),
    (dist.split_group, ["split_ranks", "group_desc"]),
    (torch.autocast.__init__, ["device_type", "dtype"]),
]


@pytest.mark.parametrize("fn,names", API, ids=[f.__qualname__ for f, _ in API])
def test_the_torch_api_of_the_nccl_path_exists(fn, names):
    missing = [n for n in names if n not in _params(fn)]
    assert not missing, f"{fn.__qualname__}{inspect.signature(fn)} has no {missing}"


def test_the_capture_mode_mpibench_asks_for_is_one_torch_names():
    assert "thread_local" in inspect.getdoc(torch.cuda.graph)


def _plan(graph, size=4 << 30):
    return Plan(collectives=[REGISTRY["all_reduce"]], sizes=[size], dtypes=[DTYPES["float32"]],
                ops=["sum"], iters=20, warmup=5, check=1, graph=graph, probe_iters=20)


def test_the_row_deadline_counts_every_replay_and_is_capped():
    """-G 100 -e 4G: 20 iterations replayed 100 times are 2000 calls, not 20; at 1 GB/s of
    2 x 4 GiB per call they take about 4.8 hours. A deadline that long turns hang detection
    off: the default stops at DEADLINE_CAP, and the header says what --timeout allows it."""
    plain, graphed = _plan(0), _plan(100)
    assert calls_per_row(plain) == 5 + 1 + 20 + 1
    assert calls_per_row(graphed) == 5 + 1 + 20 * 100 + 1
    traffic = 20 * 100 * 2 * (4 << 30) / 1e9
    assert run.traffic_deadline(graphed) > traffic
    assert run.default_timeout(graphed) == run.DEADLINE_CAP == 1800
    assert run.default_timeout(plain) == run.traffic_deadline(plain) < traffic / 50
    assert runtext.watchdog_line(1800, run.traffic_deadline(graphed)) == (
        "# watchdog: a row that takes over 1800 s is called hung (--timeout); capped: the "
        "largest row's traffic at 1 GB/s would take 17300 s, --timeout 17300 allows it")
    assert runtext.watchdog_line(run.default_timeout(plain)) == (
        "# watchdog: a row that takes over 292 s is called hung (--timeout)")


class _Out:
    def __init__(self):
        self.lines, self.items = [], {}

    def say(self, text):
        self.lines.append(text)

    def set(self, **items):
        self.items.update(items)


def test_the_memory_line_reports_device_memory_on_gpus():
    session = SimpleNamespace(hosts=["a", "b"])
    out = _Out()
    runtext.memory_summary(session.hosts, out, [
        {"peak_rss_bytes": 900 << 20, "buffer_bytes": 8 << 30, "device_peak_bytes": 9 << 30},
        {"peak_rss_bytes": 1000 << 20, "buffer_bytes": 8 << 30, "device_peak_bytes": 10 << 30}])
    assert out.lines == ["# peak device memory (torch.cuda.max_memory_allocated): 10.0 GiB on "
                         "rank 1 (host b), of which buffers 8.0 GiB; peak host resident memory "
                         "1000.0 MiB on rank 1 (host b)"], out.lines
    assert out.items["memory"][0]["device_peak_bytes"] == 9 << 30
    cpu = _Out()
    runtext.memory_summary(session.hosts, cpu, [
        {"peak_rss_bytes": 900 << 20, "buffer_bytes": 1 << 20, "device_peak_bytes": None},
        {"peak_rss_bytes": 800 << 20, "buffer_bytes": 1 << 20, "device_peak_bytes": None}])
    assert cpu.lines[0].startswith("# peak resident memory: 900.0 MiB on rank 0 (host a), "
                                   "of which buffers 1.0 MiB"), cpu.lines


@pytest.mark.parametrize("env,names,said", [
    ({"TORCH_NCCL_BLOCKING_WAIT": "1"}, ["nccl"], "TORCH_NCCL_BLOCKING_WAIT=1"),
    ({"TORCH_NCCL_BLOCKING_WAIT": "true"}, ["gloo", "nccl"], "TORCH_NCCL_BLOCKING_WAIT=true"),
    ({"TORCH_NCCL_BLOCKING_WAIT": "T"}, ["nccl"], "TORCH_NCCL_BLOCKING_WAIT=T"),
    ({"TORCH_NCCL_BLOCKING_WAIT": "Yes"}, ["nccl"], "TORCH_NCCL_BLOCKING_WAIT=Yes"),
    ({"NCCL_BLOCKING_WAIT": "y"}, ["nccl"], "NCCL_BLOCKING_WAIT=y"),
    ({"NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_BLOCKING_WAIT": "0"}, ["nccl"], None),
    ({"NCCL_BLOCKING_WAIT": "0", "TORCH_NCCL_BLOCKING_WAIT": "t"}, ["nccl"], "TORCH_NCCL_BLOCKING_WAIT=t"),
    ({"TORCH_NCCL_BLOCKING_WAIT": "0"}, ["nccl"], None), ({"TORCH_NCCL_BLOCKING_WAIT": "2"}, ["nccl"], None),
    ({}, ["nccl"], None), ({"TORCH_NCCL_BLOCKING_WAIT": "1"}, ["gloo"], None)])
def test_blocking_wait_is_named_in_the_header_as_torch_reads_it(env, names, said):
    """torch's getCvarBool (c10d/Utils.hpp): TORCH_NCCL_BLOCKING_WAIT, then NCCL_BLOCKING_WAIT,
    the first set wins; 1, true, t, yes, y in any case are on."""
    note = runtext.blocking_wait_note([SimpleNamespace(name=n) for n in names], env)
    assert note == (None if said is None else
                    f"# {said}: point-to-point waits block the host, so -z 0 sendrecv behaves as "
                    f"-z 2 (each call waited for before the next)")


def _gpu_plan(argv, monkeypatch, env):
    """run's plan for argv on a backend that says it has CUDA (nothing of CUDA is called)."""
    from mpibench import cli
    for name in ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _, args = cli.parse(["run", *argv])
    backend = SimpleNamespace(cuda=True, name="nccl", default_blocking=lambda: 0,
                              unsupported=lambda *a: None, modes=lambda c: c.modes, missing_mode="")
    return run.build_plan(args, SimpleNamespace(size=2), backend)


@pytest.mark.parametrize("env", [{"TORCH_NCCL_BLOCKING_WAIT": "1"}, {"NCCL_BLOCKING_WAIT": "t"}])
def test_graphs_with_blocking_wait_refuse_sendrecv_in_one_line(env, monkeypatch):
    """WorkNCCL::wait's blocking loop queries sendrecv's end event, recorded during the
    capture: CUDA refuses (cudaErrorCapturedEvent). Other collectives return no Work."""
    from mpibench.errors import UsageError
    with pytest.raises(UsageError) as got:
        _gpu_plan(["-G", "2", "--collectives", "all_reduce,sendrecv"], monkeypatch, env)
    assert str(got.value).startswith(f"-G cannot capture sendrecv with {'='.join(*env.items())}: ")
    assert got.value.code == 2
    assert _gpu_plan(["-G", "2", "--collectives", "all_reduce"], monkeypatch, env).graph == 2
    assert _gpu_plan(["--collectives", "sendrecv"], monkeypatch, env).graph == 0
    assert _gpu_plan(["-G", "2", "--collectives", "sendrecv"], monkeypatch,
                     {"TORCH_NCCL_BLOCKING_WAIT": "0", "NCCL_BLOCKING_WAIT": "1"}).graph == 2


def test_gpu_and_host_memory_backends_are_named_in_header_and_comparison():
    """--backend nccl,mpi: NCCL on GPU buffers, MPI on host buffers; the header and the
    comparison table say so, and say nothing where both use host memory (gloo,mpi)."""
    from mpibench.results.summary import comparison, comparison_lines
    nccl, mpi, gloo = (SimpleNamespace(name="nccl", cuda=True), SimpleNamespace(name="mpi"),
                       SimpleNamespace(name="gloo", cuda=False))
    assert runtext.memory_note([gloo, mpi]) is None
    assert runtext.memory_note([nccl, mpi]) == (
        "# buffers: nccl in GPU memory, mpi in host memory; MPI gets host buffers (CUDA-aware "
        "MPI is not used), so the backends are compared on different data paths, not only "
        "different libraries")
    mode = {"time_us": 10.0, "algbw_GBps": 1.0, "busbw_GBps": 1.0}
    rows = [{"backend": b, "collective": "all_reduce", "size": 1024, "type": "float",
             "redop": "sum", "root": -1, "in_place": mode, "out_of_place": None}
            for b in ("nccl", "mpi")]
    memory = runtext.buffer_memory([nccl, mpi])
    said = "# nccl moves GPU memory, mpi host memory: different data paths, not only different libraries"
    assert said in comparison(rows, "nccl", "mpi", memory)[1]
    doc = {"results": rows, "comparison": {"backends": ["nccl", "mpi"], "memory": memory}}
    assert said in comparison_lines(doc)
    assert not any("moves" in line for line in comparison(rows, "gloo", "mpi", {"gloo": "host",
                                                                               "mpi": "host"})[1])


def test_the_modes_gpu_tests_expect_are_the_registry_s():
    """tests/gpu expect rows by gpu_helpers.MODES: the collective registry decides them, so
    a GPU test never waits for a row that a correct run does not print."""
    from conftest import ROOT
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    import gpu_helpers
    assert gpu_helpers.MODES == {name: c.modes for name, c in REGISTRY.items()}
    assert gpu_helpers.NEEDS_TWO == {name for name, c in REGISTRY.items() if c.min_ranks > 1}


def test_setup_cfg_states_the_lowest_torch_and_why():
    from conftest import ROOT
    text = open(f"{ROOT}/setup.cfg").read()
    assert "torch>=2.8\n" in text and "returning no Work" in text
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    assert version >= (2, 8)


@pytest.mark.parametrize("gib,reserve", [(1, 2), (8, 2), (16, 2), (16.5, 3), (24, 3), (40, 4),
                                         (80, 5), (141, 5)])
def test_the_reserve_for_nccl_is_nccl_tests(gib, reserve):
    """common.cu: min(ceil(mem / 16 GiB) x 1 GiB, 4 GiB) + 1 GiB."""
    assert nccl_reserve(int(gib * GIB)) == reserve * GIB


def _room(totals, sizes, name="all_to_all"):
    """reserve_room on two ranks whose GPUs have totals bytes, for a plan of sizes: (the plan it
    leaves, the room)."""
    plan = Plan(collectives=[REGISTRY[name]], sizes=sizes, dtypes=[DTYPES["float32"]], ops=["sum"])
    session = SimpleNamespace(size=2, comm=SimpleNamespace(allgather=lambda mine: totals))
    backend = SimpleNamespace(device_total_bytes=lambda: totals[0], modes=lambda c: c.modes)
    room, lowered = reserve_room(session, backend, plan)
    return lowered, room


def test_the_largest_size_is_lowered_to_leave_nccl_its_room():
    """all_to_all needs a send and a receive buffer of the size: 4 GiB takes 8 GiB, more than
    the 6 GiB an 8 GiB GPU leaves beside its 2 GiB reserve; the smaller GPU decides."""
    sizes = [1 * GIB, 2 * GIB, 4 * GIB]
    plan, room = _room([80 * GIB, 8 * GIB], sizes)
    assert plan.sizes == [1 * GIB, 2 * GIB]
    assert room == {"device_bytes": 8 * GIB, "reserve_bytes": 2 * GIB, "maxbytes": 4 * GIB,
                    "lowered_to": 2 * GIB}
    plan, room = _room([80 * GIB, 80 * GIB], sizes)
    assert plan.sizes == sizes and room["lowered_to"] is None and room["reserve_bytes"] == 5 * GIB
    plan, room = _room([GIB, GIB], sizes)           # not even the smallest: allocate says so
    assert plan.sizes == [GIB] and room["lowered_to"] == GIB
    plan, room = _room([5 * GIB, 5 * GIB], sizes, "all_reduce")   # in place: one buffer
    assert plan.sizes == sizes[:2]
    cpu = SimpleNamespace(device_total_bytes=lambda: None)
    assert reserve_room(None, cpu, plan) == (None, plan)


def test_the_header_says_when_maxbytes_was_lowered():
    out = _Out()
    runtext.room_header(out, {"nccl": _room([8 * GIB, 8 * GIB], [1 * GIB, 4 * GIB])[1], "mpi": None})
    assert out.lines == ["# device memory (nccl): -e lowered from 4 GiB to 1 GiB, leaving "
                         "2.0 GiB of the smallest GPU's 8.0 GiB to NCCL's own buffers, graphs "
                         "and the check (as nccl-tests: 1 GiB per 16 GiB, at most 4, plus "
                         "1 GiB)"], out.lines
    assert list(out.items["device_memory"]) == ["nccl"]
    out = _Out()
    runtext.room_header(out, {"nccl": _room([80 * GIB] * 2, [1 * GIB, 4 * GIB])[1]})
    assert out.lines[0].startswith("# device memory (nccl): -e 4 GiB fits, leaving 5.0 GiB"), out.lines
    out = _Out()
    runtext.room_header(out, {"gloo": None})
    assert out.lines == [] and out.items == {}


def test_graph_buffers_come_from_the_nccl_allocator_or_the_header_says_not():
    """-G: torch's process groups offer their allocator (gloo refuses it); the header and
    the JSON name where the buffers came from and claim no registration nothing checked."""
    assert hasattr(torch._C._distributed_c10d.Backend, "mem_allocator")
    assert hasattr(torch._C._distributed_c10d.ProcessGroup, "_get_backend")
    out = _Out()
    runtext.graph_buffers_header(out, {"nccl": {"allocator": "ncclMemAlloc", "registered": None,
                                            "reason": None}})
    assert out.lines == ["# -G buffers (nccl): ncclMemAlloc (torch.cuda.MemPool over the NCCL "
                         "process group's allocator), which NCCL can register during graph "
                         "capture; whether it did is not checked. nccl-tests allocates with "
                         "ncclMemAlloc in every run, mpibench with -G only"], out.lines
    assert out.items["graph_buffers"]["nccl"]["registered"] is None
    reason = "RuntimeError: Backend gloo does not support getMemAllocator"
    out = _Out()
    runtext.graph_buffers_header(out, {"gloo": {"allocator": "torch caching allocator",
                                            "registered": None, "reason": reason}})
    assert out.lines[0].startswith(f"# -G buffers (gloo): torch's caching allocator ({reason}): "
                                   f"not ncclMemAlloc memory"), out.lines
    assert out.items["graph_buffers"]["gloo"]["allocator"] == "torch caching allocator"
    out = _Out()
    runtext.graph_buffers_header(out, {})
    assert out.lines == [] and out.items == {}


@pytest.mark.parametrize("graph", [0, 2])
def test_launch_header_names_each_collective_and_says_graphs_mark_nothing(graph):
    out = _Out()
    runtext.launch_header(out, {"nccl": {"all_reduce": 9e-6, "sendrecv": 21e-6}}, graph)
    assert len(out.lines) == 1 and "all_reduce 9.0, sendrecv 21.0" in out.lines[0], out.lines
    assert ("no row is marked launch-bound" in out.lines[0]) == bool(graph), out.lines
    assert ("-G avoids it" in out.lines[0]) == (not graph), out.lines
    assert out.items["launch_cost_us"] == {"nccl": {"all_reduce": pytest.approx(9.0),
                                                  "sendrecv": pytest.approx(21.0)}}


@pytest.mark.parametrize("env,after", [
    ({}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}),
    ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}),
    ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, {"NCCL_ASYNC_ERROR_HANDLING": "1"})])
def test_torch_keeps_a_rank_alive_on_nccl_errors_unless_the_user_chose(env, after):
    """torch's default (3, SkipCleanUp) SIGABRTs the rank from its watchdog thread before
    mpibench can report; 2 (CleanUpOnly) aborts the communicators so the next call raises.
    A mode the user set, under either name torch reads, stays."""
    from mpibench.launch import torchenv
    chose = bool(env)
    env = dict(env)
    assert torchenv.keep_rank_on_nccl_errors(env) is not chose
    assert env == after


def test_no_unbatched_point_to_point_calls():
    """On an eagerly made NCCL group torch warns of every plain send/recv ("unbatched P2P op
    ... serialized") on every rank's stderr: p2p, run's link check and check send through
    batch_isend_irecv (measure/collectives/sendrecv.py, one_way and exchange)."""
    import re
    from conftest import ROOT
    plain = re.compile(r"\bdist\.(send|recv)\b")
    found = []
    for path in sorted((os.path.join(d, f) for d, _, fs in os.walk(os.path.join(ROOT, "mpibench"))
                        for f in fs if f.endswith(".py"))):
        for k, line in enumerate(open(path), 1):
            if plain.search(line):
                found.append(f"{os.path.relpath(path, ROOT)}:{k}: {line.strip()}")
    assert not found, found

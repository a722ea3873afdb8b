"""predict's checks of itself and of its inputs: the held-out check and the `regime change`
line on a synthetic drop, intervals that decline what two counts cannot show, every input
that does not belong with the others refused in one line with exit 2 (each by a real
`python -m mpibench predict`), the switch tier of --topology, and the published held-out
table (bench/predict_real.py) as docs/commands/predict.md shows it."""
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT, lone, show
from test_analysis import SCALING, bad_input, needs_scaling

sys.path.insert(0, ROOT)
from mpibench.analysis import bands, extrapolate  # noqa: E402
from mpibench.measure.collectives import REGISTRY  # noqa: E402

ENV5 = SCALING / "alcf_polaris" / "nccl2.18-nvhpc23.9_env5" if SCALING else None
SIZES = [1 << k for k in range(20, 27)]       # 1-64 MiB


def log(coll, nodes, g=2, slow=1.0, version=None, dtype="float", sizes=SIZES, top=None, trailer=False):
    """An nccl-tests log of coll on nodes hosts of g ranks: 5 us + size / (10 GB/s) per call, slow
    times that."""
    lines = ([f"# nccl-tests version {version} nccl-headers=22807 nccl-library=22807"] if version else []) + [
        f"# Collective test starting: {coll}_perf",
        f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {top or sizes[-1]} step: 2(factor) warmup "
        "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r} on node{r // g:03d} device {r % g:2d} [0x07] "
              f"NVIDIA H100" for r in range(nodes * g)]
    lines += ["#", "#                                                              out-of-place"
              "                       in-place          ",
              "#       size         count      type   redop    root     time   algbw   busbw  #wrong     "
              "time   algbw   busbw  #wrong ",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
              "(us)  (GB/s)  (GB/s)         "]
    total, n = [], nodes * g
    factor = REGISTRY[coll].busbw_factor(n)
    for s in sizes:
        t = (5 + s / 10e3) * slow
        bw = s / t / 1e3
        total.append(bw * factor)
        cells = f"{t:8.1f} {bw:7.2f} {bw * factor:7.2f}       0"
        count = s // 4 // (n if coll in ("all_gather", "all_to_all") else 1)
        redop = "none" if coll in ("all_gather", "all_to_all") else "sum"
        lines.append(f" {s:11d} {count:12d} {dtype:>9} {redop:>7} {-1:7d} {cells} {cells}")
    if trailer:
        lines += ["# Out of bounds values : 0 OK",
                  f"# Avg bus bandwidth    : {sum(total) / len(total):.4f} ", "#"]
    return "\n".join(lines) + "\n"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def synthetic(coll, drop=0.6, counts=(2, 4, 8), g=2):
    """Points of coll: the same bus bandwidth at every count but the last, which runs at drop x it."""
    pts = []
    for n in counts:
        slow = 1 / drop if n == counts[-1] else 1.0
        for s in SIZES:
            t = (5e-6 + s / 10e9) * slow
            pts.append((n * g, g, s, float(s), t))
    return pts


@pytest.mark.parametrize("coll", ["sendrecv", "all_gather", "all_to_all", "all_reduce"])
def test_regime_change_on_a_synthetic_drop(coll, monkeypatch):
    """Flat at 2 and 4 nodes, 40% slower at 8: given all three, the held-out check misses 8 nodes
    by ~40% against a fit of a few percent, says `regime change` between 4 and 8 and predicts 32
    from 8 alone. Given only 2 and 4, every row at 8 is inside its interval or declined: sendrecv's
    are declined (the same pair of nodes at every count), the others' slow side allows the fall
    flat inputs cannot rule out (bands.TIER per doubling); without that allowance they miss.
    Without the drop, sendrecv and all_gather pass their held-out check."""
    pts = synthetic(coll)
    keys = sorted({k for _, _, k, _, _ in pts})
    res = extrapolate.group("nccl", coll, "nccl", "float32", pts, 64, 2, keys)
    assert res.check and res.check.held == 16 and res.check.error > 0.3, res.check
    assert bands.regime_change(res.check.miss, res.check.rms) and res.regime == (8, 16), res.check
    assert all(r.cand == ("flat",) and r.why is None for r in res.rows)
    two = [x for x in pts if x[0] < 16]
    at8 = {s: t for n, _, s, _, t in pts if n == 16}
    got = extrapolate.group("nccl", coll, "nccl", "float32", two, 16, 2, keys)
    assert got.flat is not None and got.rows and all(r.why or r.lo <= at8[r.key] <= r.hi for r in got.rows), \
        [(r.key, r.t, r.lo, r.hi, r.why, at8[r.key]) for r in got.rows]
    assert all(r.why == "same pair" for r in got.rows) == (coll == "sendrecv")
    far = extrapolate.group("nccl", coll, "nccl", "float32", two, 256, 2, keys).rows
    assert far and all(r.why for r in far), [(r.key, r.why) for r in far]   # x0.571 per doubling, 5 doublings
    monkeypatch.setattr(bands, "TIER", 0.0)
    bare = extrapolate.group("nccl", coll, "nccl", "float32", two, 16, 2, keys).rows
    assert any(not r.why and not r.lo <= at8[r.key] <= r.hi for r in bare) == (coll != "sendrecv")
    for other in ("sendrecv", "all_gather"):
        steady = extrapolate.group("nccl", other, "nccl", "float32", synthetic(other, 1.0), 64, 2, keys)
        assert steady.check and not steady.regime and steady.check.error < 0.1, steady.check


def test_flat_inputs_fall_per_doubling():
    """bands.fall: the median fall of the bus bandwidth per doubling over the sizes both counts ran;
    the slow side of an interval is at least Parts.slow, declined where the fall beyond the largest
    input's bus bandwidth (Parts.fall) exceeds DECLINE."""
    bus = {1: {2: 10.0, 8: 2.5}, 2: {2: 10.0, 8: 10.0}, 3: {2: 10.0, 8: 5.0}, 4: {2: 1.0}}
    assert abs(bands.fall(bus, 2, 8) - 0.6931 / 2) < 1e-3 and bands.fall({4: {2: 1.0}}, 2, 8) is None
    lo, hi, out = bands.interval(bands.Parts(1.0, 0.1, 0.5, 0.0, 0.0, 0.56, 0.56))
    assert abs(lo - 0.8825) < 1e-3 and abs(hi - 1.7507) < 1e-3 and not out
    assert bands.interval(bands.Parts(1.0, 0.1, 0.5, 0.0, 0.0, 0.1, bands.DECLINE + 0.1))[2]


@needs_scaling
def test_tier_is_the_largest_fall_of_the_shared_series():
    """bands.TIER is what bench/predict_calibrate.py finds: the largest fall of the bus bandwidth
    per doubling between successive counts of any shared series; no shared case it predicts from
    two counts is flat, so the pooled table does not depend on it."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import predict_calibrate
    got = predict_calibrate.falls(SCALING)
    assert round(got[-1][0], 2) == bands.TIER, got[-1]
    assert got[0][0] < bands.FLAT, got[0]      # flat pairs exist in published runs: the rule is not idle


def test_intervals_widen_with_the_distance_and_the_disagreement():
    p = bands.Parts(1.0, 0.05, 0.0, 0.0)
    lo, hi, out = bands.interval(p)
    assert abs(hi - 1.05127) < 1e-4 and not out
    far = bands.interval(p._replace(far=4.0))
    wide = bands.interval(p._replace(far=4.0, spread=1.0))
    assert far[1] > hi and wide[1] > far[1] and not wide[2]
    assert bands.interval(p._replace(far=1.0, spread=bands.DECLINE + 0.1))[2]       # declined
    assert not bands.interval(p._replace(spread=bands.DECLINE + 0.1))[2]            # within the inputs
    assert abs(bands.loglinear({2: 1.0, 4: 2.0}, 16) - 8.0) < 1e-9
    assert not bands.regime_change(0.1, 0.05) and bands.regime_change(0.5, 0.05)
    assert not bands.regime_change(0.5, 0.2)


@pytest.mark.usefixtures("procs")
def test_predict_prints_regime_change_and_declines_same_pair_sendrecv(tmp_path):
    files = [write(tmp_path, f"N{n}.txt", log("sendrecv", n, slow=1 / 0.6 if n == 8 else 1.0))
             for n in (2, 4, 8)]
    done = lone(["predict", *files, "--hosts", "32"])
    assert done.returncode == 0, show(done)
    assert re.search(r"^# held out 8 nodes: median \|error\| (\d+)\.\d%", done.stdout, re.M), show(done)
    assert "# regime change between 4 nodes and 8 nodes" in done.stdout, show(done)
    assert "assumes that the switches above the measured nodes give what the run at 8 nodes saw" \
        in done.stdout, show(done)
    done = lone(["predict", *files[:2], "--hosts", "8", "--measured", files[2]])
    assert done.returncode == 0, show(done)
    assert "sendrecv from two counts" in done.stdout, show(done)
    assert "# no held-out check: two counts (2 nodes, 4 nodes) cannot test their own trend" \
        in done.stdout, show(done)
    assert re.search(r", 0 rows, 0 of 0 inside the interval, \d+ more not predicted|no rows predicted",
                     done.stdout), show(done)
    gather = [write(tmp_path, f"G{n}.txt", log("all_gather", n, slow=1 / 0.6 if n == 8 else 1.0))
              for n in (2, 4, 8)]
    done = lone(["predict", *gather[:2], "--hosts", "8", "--measured", gather[2]])
    assert done.returncode == 0, show(done)
    assert re.search(r"^# flat inputs: from 2 nodes to 4 nodes the bus bandwidth at sizes >= 1 MiB "
                     r"goes x1\.17 per doubling .* slow side reaches its bus bandwidth at x0\.571 "
                     r"per doubling "
                     r"\(1 to 8 nodes\)",
                     done.stdout, re.M), show(done)
    assert ", sizes >= 1 MiB: median |error| 35.7%, max 35.8% (all_gather 2 MiB), 7 rows, 7 of 7 " \
        "inside the interval" in done.stdout, show(done)


@pytest.mark.usefixtures("procs")
def test_predict_refuses_inputs_that_do_not_belong_together(tmp_path):
    """Each: one line, exit 2, naming what differs."""
    a, b = (write(tmp_path, f"N{n}.txt", log("all_reduce", n)) for n in (2, 4))
    cases = {
        "different collectives": [a, write(tmp_path, "ag.txt", log("all_gather", 4))],
        "with different types": [a, write(tmp_path, "int.txt", log("all_reduce", 4, dtype="int32"))],
        "ranks (GPUs) per host": [a, write(tmp_path, "g4.txt", log("all_reduce", 2, g=4))],
        "NCCL versions": [write(tmp_path, "v1.txt", log("all_reduce", 2, version="2.17.6")),
                          write(tmp_path, "v2.txt", log("all_reduce", 4, version="2.17.6").replace(
                              "22807", "22907"))],
        "nccl-tests versions": [write(tmp_path, "t1.txt", log("all_reduce", 2, version="2.17.6")),
                                write(tmp_path, "t2.txt", log("all_reduce", 4, version="2.18.0"))],
        "cut short": [a, write(tmp_path, "cut.txt", log("all_reduce", 4, top=1 << 30))],
        "below the smallest input": [a, b, "--hosts", "1"],
        "--measured": [a, b, "--hosts", "8", "--measured", write(tmp_path, "m.txt", log("all_gather", 8))],
        "ranks per host, the inputs": [a, b, "--ranks", "16", "--measured",
                                       write(tmp_path, "m4.txt", log("all_reduce", 4, g=4))],
    }
    for why, args in cases.items():
        argv = ["predict", *args] + ([] if "--hosts" in args or "--ranks" in args else ["--hosts", "16"])
        done = lone(argv)
        bad_input(done)
        assert why in done.stderr, (why, show(done))
    done = lone(["predict", a, write(tmp_path, "cut2.txt", log("all_reduce", 4, top=1 << 30)),
                 "--hosts", "16", "--partial"])
    assert done.returncode == 0 and "cut short: --partial, using its rows" in done.stdout, show(done)


@pytest.mark.usefixtures("procs")
def test_predict_says_which_test_and_when_it_interpolates(tmp_path):
    """A log of two tests of one collective: the first, said so, or --test N; a target between
    the inputs: `interpolating`."""
    a = write(tmp_path, "N2.txt", log("all_reduce", 2, trailer=True))
    both = write(tmp_path, "N8.txt", log("all_reduce", 8, trailer=True) +
                 log("all_reduce", 8, sizes=[1 << 26], slow=3.0, trailer=True))
    done = lone(["predict", a, both, "--hosts", "4"])
    assert done.returncode == 0, show(done)
    assert "tests 1, 2 all hold all_reduce: using test 1 (give --test N for another)" in done.stdout, \
        show(done)
    assert "# 4 nodes lies within the inputs (2 nodes to 8 nodes): interpolating" in done.stdout, show(done)
    done = lone(["predict", a, both, "--hosts", "4", "--test", "2"])
    assert done.returncode == 0 and "using test 1" not in done.stdout, show(done)
    bad_input(lone(["predict", a, both, "--hosts", "4", "--test", "3"]))


@pytest.mark.usefixtures("procs")
def test_predict_topology_declines_a_tier_no_input_crossed(tmp_path):
    a, b = (write(tmp_path, f"N{n}.txt", log("all_reduce", n)) for n in (2, 4))
    topo = write(tmp_path, "topology.conf", "SwitchName=leaf0 Nodes=node[000-007]\n"
                 "SwitchName=leaf1 Nodes=node[008-015]\nSwitchName=spine Switches=leaf0,leaf1\n")
    done = lone(["predict", a, b, "--hosts", "8", "--topology", topo])
    assert done.returncode == 0 and "8 nodes fit under tier 0" in done.stdout, show(done)
    assert "# flat inputs" not in done.stdout, show(done)       # the topology rules the next tier out
    assert "# flat inputs" in lone(["predict", a, b, "--hosts", "8"]).stdout
    done = lone(["predict", a, b, "--hosts", "16", "--topology", topo])
    assert done.returncode == 0, show(done)
    assert "16 nodes need switch tier 1 (leaf switches: 0), the inputs crossed tier 0 at most" in done.stdout
    assert "the target needs a switch tier no input crossed (--topology)" in done.stdout, show(done)
    done = lone(["predict", a, b, "--hosts", "32", "--topology", topo])
    assert "lists 16 hosts, fewer than 32" in done.stdout, show(done)
    bad_input(lone(["predict", a, b, "--hosts", "16", "--topology",
                    write(tmp_path, "t2.conf", "SwitchName=leaf0 Nodes=node[000-001]\n")]))


@needs_scaling
def test_published_held_out_table_is_the_documented_one():
    """bench/predict_real.py's table (every held-out case of the shared series, the pooled line,
    leave one series out) is the one docs/commands/predict.md shows, and it holds what
    docs/commands/predict.md promises: 95% inside or not predicted, 74% predicted, median
    half-width at most 40%."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import predict_real
    got = predict_real.table(SCALING)
    doc = (Path(ROOT) / "docs" / "commands" / "predict.md").read_text().splitlines()
    start = doc.index(got[0])
    for mine, theirs in zip(got, doc[start:start + len(got)], strict=True):
        a, b = (re.split(r"(\d+\.?\d*)", line) for line in (mine, theirs))
        assert len(a) == len(b) and a[::2] == b[::2], (mine, theirs)
        assert all(abs(float(x) - float(y)) <= (0.5 if "." in x else 1) for x, y in zip(a[1::2], b[1::2])), \
            (mine, theirs)
    for line in got[-2:]:
        m = re.search(r": (\d+)% inside or not predicted, (\d+)% predicted, median half-width ([\d.]+)%",
                      line)
        assert m and int(m[1]) >= 95 and int(m[2]) >= 74 and float(m[3]) <= 40, line

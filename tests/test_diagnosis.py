"""p2p (host matrix, round-robin pairs, slow links and hosts), run's link check, and
doctor (host facts, differences, findings, NCCL transport logs).

Pure logic is tested directly; the commands run for real under mpirun, and on
several hosts made of network namespaces (launch/fakecluster.py, root only) with one
host's link throttled by tc to a quarter of the others.
"""
import itertools
import json
import random
import re
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, base_env, lone, mpibench_lines, mpirun, show

from mpibench.diagnose import findings as diagnose, hostfacts, ncclinfolog, pairs, stragglers

sys.path.insert(0, str(Path(ROOT) / "launch"))
import fakecluster  # noqa: E402

FAST, SLOW = "1gbit", "250mbit"     # a quarter

needs_hosts = pytest.mark.usefixtures("hosts")


# ---------------------------------------------------------------- schedule
@pytest.mark.parametrize("n", range(2, 10))
def test_round_robin_covers_every_pair_once_and_no_item_twice_in_a_round(n):
    rounds = pairs.round_robin(range(n))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == sorted(itertools.combinations(range(n), 2))
    for r in rounds:
        members = [x for p in r for x in p]
        assert len(members) == len(set(members))


def test_schedule_with_several_ranks_per_host_never_puts_a_host_in_two_pairs():
    hosts = ["a", "a", "b", "b", "c", "c", "d"]
    rounds = pairs.schedule(range(len(hosts)), hosts)
    assert sorted(p for r in rounds for p in r) == sorted(itertools.combinations(range(7), 2))
    for r in rounds:
        busy = [h for a, b in r for h in {hosts[a], hosts[b]}]
        assert len(busy) == len(set(busy)), r


def test_slower_end_is_the_later_of_a_transfers_two_ends_in_each_iteration():
    gathered = [[{"from": 0, "to": 1, "times": [1.0, 5.0]}],
                [{"from": 0, "to": 1, "times": [2.0, 3.0]}, {"from": 1, "to": 0, "times": [4.0]}],
                []]
    assert pairs.slower_end(gathered) == {(0, 1): [2.0, 5.0], (1, 0): [4.0]}


def test_participants_are_the_lowest_rank_of_each_host_or_every_rank():
    hosts = ["h1", "h1", "h2", "h3", "h2", "h3"]
    assert pairs.participants(hosts) == [0, 2, 3]
    assert pairs.participants(hosts, every_rank=True) == list(range(6))


# ---------------------------------------------------------------- naming
def _links(hosts, slow_hosts=(), slow_links=(), iters=10, noise=0.05, seed=1, spike=None):
    """Per-iteration seconds of every directed link; slow ones take 4x as long."""
    rng = random.Random(seed)
    out = {}
    for a, b in itertools.permutations(range(len(hosts)), 2):
        slow = hosts[a] in slow_hosts or hosts[b] in slow_hosts or (a, b) in slow_links
        base = 4.0 if slow else 1.0
        out[(a, b)] = [base * (1 + rng.uniform(-noise, noise)) for _ in range(iters)]
    if spike:
        out[spike][0] *= 10
    return out


@pytest.mark.parametrize("n", [3, 4, 6])
def test_analyze_names_the_throttled_host_and_its_links(n):
    hosts = [f"h{i + 1}" for i in range(n)]
    result = pairs.analyze(hosts, _links(hosts, slow_hosts={hosts[-1]}))
    assert result["slow_hosts"] == [hosts[-1]]
    assert sorted(result["slow_links"]) == sorted(k for k in itertools.permutations(range(n), 2)
                                                 if n - 1 in k)


def test_analyze_names_nobody_when_links_are_equal_or_one_iteration_is_noisy():
    hosts = ["h1", "h2", "h3", "h4"]
    for links in (_links(hosts, noise=0.1), _links(hosts, spike=(0, 3))):
        result = pairs.analyze(hosts, links)
        assert result["slow_hosts"] == [] and result["slow_links"] == []


def test_analyze_names_a_single_bad_link_but_no_host():
    hosts = ["h1", "h2", "h3", "h4"]
    result = pairs.analyze(hosts, _links(hosts, slow_links={(0, 1)}))
    assert result["slow_links"] == [(0, 1)] and result["slow_hosts"] == []


def test_analyze_with_two_hosts_blames_no_host_and_says_why():
    result = pairs.analyze(["h1", "h2"], _links(["h1", "h2"], slow_hosts={"h2"}))
    assert result["slow_hosts"] == []
    assert "cannot be blamed on one" in result["note"]


def test_consistently_slow_needs_most_iterations():
    ref = [1.0] * 10
    assert stragglers.consistently_slow([2.0] * 8 + [1.0] * 2, ref, 0.2, 0.8)["slow"]
    assert not stragglers.consistently_slow([2.0] * 7 + [1.0] * 3, ref, 0.2, 0.8)["slow"]


# ---------------------------------------------------------------- NCCL logs
FIXTURES = {
    "NET/IB": "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA\n"
              "gpu2:5120:5170 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA\n"
              "gpu2:5120:5170 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [send] "
              "via NET/IBext_v8/1(2)/GDRDMA/Shared\n",
    "NET/Socket": "gpu1:4011:4090 [0] NCCL INFO Using network Socket\n"
                  "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0\n"
                  "gpu2:5120:5170 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/Socket/1\n",
    "P2P/CUMEM": "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
                 "gpu1:4012:4091 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM\n",
    "P2P/IPC": "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n",
    "SHM": "gpu1:4011:4090 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n"
           "gpu1:4011:4090 [0] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via SHM/CE/direct\n",
    "NVLS": "gpu1:4011:4090 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
            "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
            "gpu1:4011:4090 [0] NCCL INFO NVLS multicast support is available on dev 0 (NVLS_NCHANNELS 16)\n"
            "gpu1:4011:4090 [0] NCCL INFO Connected NVLS tree\n"
            "gpu1:4011:4090 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, "
            "32 p2p channels, 32 p2p channels per peer\n",
    "CollNet": "gpu1:4011:4090 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n"
               "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA\n"
               "gpu1:4011:4090 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n",
}
HOSTS4 = ["gpu1", "gpu1", "gpu2", "gpu2"]


@pytest.mark.parametrize("transport", sorted(FIXTURES))
def test_nccl_log_parser_finds_each_transport(transport):
    parsed = ncclinfolog.parse(FIXTURES[transport])
    found = ncclinfolog.by_host_pair([parsed], HOSTS4)
    everything = {t for used in found.values() for t in used}
    assert transport in everything, found
    assert parsed["hosts"] == ({"gpu1", "gpu2"} if "gpu2" in FIXTURES[transport] else {"gpu1"})


def test_nccl_log_pairs_are_per_host_pair():
    logs = [ncclinfolog.parse(FIXTURES["NET/IB"]), ncclinfolog.parse(FIXTURES["P2P/CUMEM"])]
    assert ncclinfolog.by_host_pair(logs, HOSTS4) == {("gpu1", "gpu1"): ["P2P/CUMEM"],
                                                  ("gpu1", "gpu2"): ["NET/IB"]}
    assert ncclinfolog.parse(FIXTURES["NET/Socket"])["network"] == "Socket"
    assert ncclinfolog.parse_line("gpu1:1:2 [0] NCCL INFO Channel 00/02 :    0   1") is None


# Line shapes of several NCCL releases (their src/transport/*.cc INFO formats): 2.18's bus
# ids in hex, 2.22's device numbers, a plugin whose name holds a space, PXN's "0(1)", p2p's
# "direct pointer" and "indirect" forms.
SHAPES = [
    ("gpu1:1:2 [0] NCCL INFO Channel 00/0 : 1[7000] -> 2[7000] [send] via NET/AWS Libfabric/0/GDRDMA",
     (1, 2, "NET/AWS Libfabric")),
    ("gpu2:1:2 [0] NCCL INFO Channel 05/0 : 3[5] -> 1[5] [receive] via NET/AWS Libfabric/5/GDRDMA\r",
     (3, 1, "NET/AWS Libfabric")),
    ("gpu1:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/AWS Libfabric/0(1)/GDRDMA/Shared",
     (1, 2, "NET/AWS Libfabric")),
    ("gpu1:1:2 [0] NCCL INFO Channel 02/1 : 0[0] -> 1[1] via P2P/direct pointer/read", (0, 1, "P2P/direct")),
    ("gpu1:1:2 [0] NCCL INFO Channel 03/1 : 0[0] -> 1[1] via P2P/indirect/2[2]", (0, 1, "P2P/indirect")),
    ("gpu1:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", (0, 1, "SHM")),
]


@pytest.mark.parametrize("line,want", SHAPES)
def test_nccl_channel_lines_of_several_releases(line, want):
    assert ncclinfolog.parse_line(line) == want


NVLS_LINES = ("gpu{h}:4011:4090 [0] NCCL INFO NVLS comm 0x55f5578b4ab0 headRank 0 nHeads 2 "
              "buffSize 4194304 nvlsPerRankSize 134217728 nvlsTotalSize 268435456\n")
COLLNET_LINE = "gpu1:4011:4090 [0] NCCL INFO CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA\n"
BETWEEN = "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA\n"


@pytest.mark.parametrize("version,env,used", [
    ("2.19.3+cuda12.2", "", False), ("2.21.5+cuda12.5", "", False),
    ("2.22.3+cuda12.5", "", True), ("2.27.7+cuda12.9", "", True),
    ("2.23.4+cuda12.6", "NCCL_RUNTIME_CONNECT set by environment to 0.", False),
    ("2.23.4+cuda12.6", "NCCL_CUMEM_ENABLE set by environment to 0.", False),
    ("2.23.4+cuda12.6", "NCCL_RUNTIME_CONNECT set by environment to 1.", True), (None, "", False)])
def test_nvls_and_collnet_are_used_only_where_nccl_connects_them_at_first_use(version, env, used):
    """From 2.22 NCCL connects NVLS and CollNet at their first use (runtime connect, on with
    cuMem): their lines say they ran. Before, or with it off, every communicator sets them up
    at init: the report says set up."""
    text = "".join([f"gpu1:4011:4090 [0] NCCL INFO NCCL version {version}\n" if version else "",
                    f"gpu1:4011:4090 [0] NCCL INFO {env}\n" if env else "",
                    BETWEEN, NVLS_LINES.format(h=1), COLLNET_LINE])
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], HOSTS4)
    mark = "" if used else ncclinfolog.SET_UP
    assert found[("gpu1", "gpu1")] == ["NVLS" + mark], found
    assert found[("gpu1", "gpu2")] == ["CollNet" + mark, "NET/IB"], found


def test_nvls_stays_with_a_host_whose_probe_used_only_nvls_inside_it():
    """gpu2's ranks logged NVLS and no channel between themselves (NCCL_ALGO=NVLS): the host
    keeps it; gpu1, which logged none, gets none."""
    text = ("gpu1:4011:4090 [0] NCCL INFO NCCL version 2.24.3+cuda12.6\n" + BETWEEN +
            "gpu1:4011:4090 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n" +
            NVLS_LINES.format(h=2))
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], HOSTS4)
    assert found == {("gpu1", "gpu1"): ["P2P/CUMEM"], ("gpu1", "gpu2"): ["NET/IB"],
                     ("gpu2", "gpu2"): ["NVLS"]}, found


REAL_LOGS = Path(ROOT).parent / "shared" / "realworld" / "nccl-tests"


def _real_log(prefix):
    if not REAL_LOGS.is_dir():
        pytest.skip(f"{REAL_LOGS} is absent (the real logs live beside the repository)")
    [path] = REAL_LOGS.glob(prefix + "_*.txt")
    text = path.read_text(errors="replace")
    hosts = {}
    for line in text.splitlines():
        m = re.search(r"(\S+?):\d+:\d+ \[\d+\] NCCL INFO comm \S+ rank (\d+) nRanks", line)
        if m:
            hosts[int(m.group(2))] = m.group(1).split(":")[-1]
    return text, [hosts[r] for r in range(len(hosts))]


def test_nccl_2_21_summary_line_is_not_collnet_nor_nvls_use():
    """Real NCCL_DEBUG=INFO logs (README.md of the real logs names their sources): 15 is
    NCCL 2.21.5 on 2 hosts, '8 coll channels, 8 collnet channels' and no CollNet
    connection; 04 is NCCL 2.22.3 on 2 hosts of 8 H100, whose 'NVLS comm ... headRank'
    lines show NVLS in use. Without those lines its '16 nvls channels' alone (NVLS
    supported) is not NVLS in use."""
    text, hosts = _real_log("15")
    assert "8 coll channels, 8 collnet channels, 0 nvls channels" in text
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], hosts)
    assert not any("CollNet" in used or "NVLS" in used for used in found.values()), found
    text, hosts = _real_log("04")
    assert "NCCL version 2.22.3" in text and " 16 collnet channels, 16 nvls channels" in text
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], hosts)
    between = found[("test-nccl-worker-0", "test-nccl-worker-1")]
    assert "CollNet" not in between and "NVLS" in found[("test-nccl-worker-0",) * 2], found
    assert ncclinfolog.parse(text)["hosts"] == {"test-nccl-worker-0", "test-nccl-worker-1"}
    unused = "\n".join(line for line in text.splitlines()
                       if "NVLS comm" not in line and "Connected NVLS" not in line)
    parsed = ncclinfolog.parse(unused)
    assert not parsed["nvls"] and not parsed["collnet"], parsed


def test_transport_findings_flag_sockets_where_rdma_exists():
    logs = [ncclinfolog.parse(FIXTURES["NET/Socket"])]
    per_host = {"gpu1": {"rdma": [{"device": "mlx5_0"}]}, "gpu2": {"rdma": []}}
    found = diagnose.transport_findings(ncclinfolog.by_host_pair(logs, HOSTS4), per_host)
    assert any("NET/Socket" in text and "gpu1 and gpu2" in text for _, text in found)


# ---------------------------------------------------------------- fabricated sysfs trees
def make_tree(root, nics=(("eth0", "up", 100000),), ports=(), modules=("ib_core", "ib_uverbs", "mlx5_ib")):
    """ports: (device, port, state, rate, link layer)."""
    root = Path(root)
    for name, state, speed in nics:
        d = root / "sys/class/net" / name
        d.mkdir(parents=True)
        (d / "operstate").write_text(state + "\n")
        (d / "speed").write_text(f"{speed}\n")
    (root / "sys/class/net/lo").mkdir(parents=True, exist_ok=True)
    (root / "sys/class/infiniband").mkdir(parents=True, exist_ok=True)
    for dev, port, state, rate, layer in ports:
        d = root / "sys/class/infiniband" / dev / "ports" / str(port)
        d.mkdir(parents=True)
        code = {"ACTIVE": 4, "DOWN": 1, "INIT": 2}[state]
        (d / "state").write_text(f"{code}: {state}\n")
        (d / "rate").write_text(rate + "\n")
        (d / "link_layer").write_text(layer + "\n")
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/modules").write_text("".join(f"{m} 16384 0 - Live 0x0\n" for m in modules))
    return str(root)


def facts(root, env=None):
    """hostfacts for a fabricated tree, as doctor collects them (no GPU here)."""
    return {"versions": {"python": "3.11", "torch": "2.13.0"}, "env": env or {}, "gpus": [],
            "driver": None, "gpu_links": [], "tool_errors": [], "cuda_visible_devices": None,
            "interfaces": hostfacts.interfaces(root), "rdma": hostfacts.rdma_ports(root),
            "rdma_modules": hostfacts.rdma_modules(root), "topology": None, "root": root}


HDR = "200 Gb/sec (4X HDR)"


def texts(found, host=None):
    return [t for h, t in found if host is None or h == host]


def test_sysfs_ib_port_down(tmp_path):
    f = facts(make_tree(tmp_path, ports=[("mlx5_0", 1, "ACTIVE", HDR, "InfiniBand"),
                                         ("mlx5_1", 1, "DOWN", "10 Gb/sec (4X SDR)", "InfiniBand")]))
    assert [p["state"] for p in f["rdma"]] == ["ACTIVE", "DOWN"]
    found = texts(diagnose.findings({"n1": f}))
    assert any("mlx5_1 port 1 is DOWN" in t for t in found), found
    assert not any("mlx5_0" in t for t in found)


def test_sysfs_roce_and_no_ib_and_missing_modules(tmp_path):
    roce = facts(make_tree(tmp_path / "a",
                           ports=[("mlx5_0", 1, "ACTIVE", "100 Gb/sec (4X EDR)", "Ethernet")]))
    noib = facts(make_tree(tmp_path / "b"))
    nomod = facts(make_tree(tmp_path / "c", ports=[("mlx5_0", 1, "ACTIVE", HDR, "InfiniBand")],
                            modules=("ib_core", "mlx5_ib")))
    found = diagnose.findings({"roce": roce, "noib": noib, "nomod": nomod})
    assert any("RoCE" in t for t in texts(found, "roce"))
    assert any("no RDMA device" in t and "NET/Socket" in t for t in texts(found, "noib"))
    assert any("ib_uverbs" in t for t in texts(found, "nomod"))
    assert not any("RoCE" in t for t in texts(found, "nomod"))


def test_sysfs_mismatched_rates_name_the_slower_host(tmp_path):
    a = facts(make_tree(tmp_path / "a", nics=[("eth0", "up", 100000)],
                        ports=[("mlx5_0", 1, "ACTIVE", HDR, "InfiniBand")]))
    b = facts(make_tree(tmp_path / "b", nics=[("eth0", "up", 25000)],
                        ports=[("mlx5_0", 1, "ACTIVE", "100 Gb/sec (4X EDR)", "InfiniBand")]))
    found = diagnose.findings({"a": a, "b": b})
    assert any("25000 Mb/s" in t for t in texts(found, "b"))
    assert any("100 Gb/s" in t and "200 Gb/s" in t for t in texts(found, "b"))
    assert not texts(found, "a")
    diffs = dict(diagnose.differences({"a": a, "b": b}))
    assert diffs["RDMA mlx5_0 port 1 rate"] == {"a": HDR, "b": "100 Gb/sec (4X EDR)"}


def test_settings_findings(tmp_path):
    f = facts(make_tree(tmp_path, ports=[("mlx5_0", 1, "ACTIVE", HDR, "InfiniBand")]),
              env={"NCCL_SOCKET_IFNAME": "ib9", "NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"})
    found = texts(diagnose.findings({"n1": f}))
    assert any("NCCL_SOCKET_IFNAME=ib9 names no interface" in t for t in found)
    assert any("NCCL_P2P_DISABLE=1" in t for t in found)
    assert any("NCCL_IB_DISABLE=1" in t for t in found)
    f["env"] = {"NCCL_IB_HCA": "=mlx5_1:1"}
    assert any("NCCL_IB_HCA==mlx5_1:1 names no RDMA device" in t for t in texts(diagnose.findings({"n1": f})))
    f["env"] = {"NCCL_IB_HCA": "mlx5"}
    assert not texts(diagnose.findings({"n1": f}))
    f["env"] = {"NCCL_SOCKET_IFNAME": "eth"}
    assert not texts(diagnose.findings({"n1": f}))


def test_gpu_topology_pcie_only():
    pcie = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPHB\t0-31\t0\nGPU1\tPHB\t X \t0-31\t0\n")
    nvlink = "\tGPU0\tGPU1\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"
    assert hostfacts.gpu_links(pcie) == {"PHB"}
    assert hostfacts.gpu_links(nvlink) == {"NV#"}


@pytest.mark.usefixtures("procs")
def test_doctor_reads_a_fabricated_tree_and_writes_json(tmp_path):
    root = make_tree(tmp_path / "tree", ports=[("mlx5_0", 1, "DOWN", HDR, "InfiniBand")])
    out = tmp_path / "doctor.json"
    done = lone(["doctor", "--sys-root", root, "--json", str(out)], env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 1, show(done)      # its only RDMA port is down: NCCL on sockets
    assert "mlx5_0/1 DOWN 200 Gb/sec (4X HDR) InfiniBand" in done.stdout
    assert "ERROR RDMA device mlx5_0 port 1 is DOWN" in done.stdout
    assert "not checked: no CUDA GPU" in done.stdout
    doc = json.loads(out.read_text())
    host = next(iter(doc["doctor"]["hosts"].values()))
    assert host["rdma"][0]["state"] == "DOWN"
    assert any("DOWN" in f["text"] for f in doc["doctor"]["findings"])


# ---------------------------------------------------------------- p2p on one host
@pytest.mark.usefixtures("procs")
def test_p2p_ranks_on_one_host_json_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    js, png = tmp_path / "p2p.json", tmp_path / "p2p.png"
    done = mpirun(3, ["p2p", "--every-rank", "-b", "256K", "-n", "3", "--latency-iters", "5",
                      "--json", str(js), "--png", str(png)], timeout=120)
    assert done.returncode == 0, show(done)
    assert "schedule: 3 pairs in 3 rounds" in done.stdout
    doc = json.loads(js.read_text())
    m = doc["p2p"]["bandwidth_GBps"]
    assert len(m) == 3 and all(m[i][i] is None for i in range(3))
    assert all(m[i][j] > 0 for i in range(3) for j in range(3) if i != j)
    assert len(doc["links"]) == 6 and all(len(x["per_iteration_us"]) == 3 for x in doc["links"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.usefixtures("procs")
def test_p2p_bidirectional():
    done = mpirun(2, ["p2p", "--every-rank", "--bidirectional", "-b", "64K", "-n", "2",
                      "--latency-iters", "3"], timeout=90)
    assert done.returncode == 0, show(done)
    assert "both ranks sending at once" in done.stdout


@pytest.mark.parametrize("args, text", [
    (["p2p"], "p2p needs two hosts"),
    (["p2p", "--min-share", "1.5"], "must be above 0 and at most 1"),
    (["p2p", "-b", "0"], "must be at least 1 byte"),
    (["p2p", "--every-rank", "--backend", "mpi"], "invalid choice: 'mpi'"),
])
@pytest.mark.usefixtures("procs")
def test_p2p_bad_input_is_one_line_and_exit_2(args, text):
    done = mpirun(2, args, timeout=60)
    lines = mpibench_lines(done.stderr)
    assert done.returncode == 2 and len(lines) == 1 and text in lines[0], show(done)
    assert done.elapsed < 30


# ---------------------------------------------------------------- namespace hosts
def on_hosts(n, rates, argv, ppn=1, env=None, timeout=240):
    with fakecluster.FakeCluster(hosts=n, rates=rates) as c:
        return c.mpirun([PYTHON, "-m", "mpibench"] + argv, ppn=ppn, env=base_env(env),
                        timeout=timeout)


def slow_host_lines(text):
    return [line for line in text.splitlines() if "SLOW HOST" in line]


@needs_hosts
def test_p2p_names_the_throttled_host_and_its_links(tmp_path):
    js = tmp_path / "p2p.json"
    done = on_hosts(4, {"*": FAST, "h4": SLOW},
                    ["p2p", "-b", "2M", "-n", "5", "--latency-iters", "10", "--json", str(js)])
    assert done.returncode == 0, show(done)
    assert [line.split()[3].rstrip(":") for line in slow_host_lines(done.stdout)] == ["h4"], done.stdout
    doc = json.loads(js.read_text())
    slow = {(x["from"], x["to"]) for x in doc["p2p_analysis"]["slow_links"]}
    assert slow == {(a, b) for a, b in itertools.permutations(["h1", "h2", "h3", "h4"], 2)
                    if "h4" in (a, b)}
    assert doc["p2p"]["hosts"] == ["h1", "h2", "h3", "h4"]
    bw = doc["p2p"]["bandwidth_GBps"]
    # tc's rates: 1 Gbit/s is 0.125 GB/s, a quarter is 0.031
    assert 0.02 < bw[0][3] < 0.04 and bw[0][1] > 0.06


@needs_hosts
def test_p2p_names_nobody_when_links_are_equal():
    done = on_hosts(3, FAST, ["p2p", "-b", "2M", "-n", "5", "--latency-iters", "10"])
    assert done.returncode == 0, show(done)
    assert "no link or host is consistently below 80%" in done.stdout, done.stdout
    assert "SLOW" not in done.stdout


@needs_hosts
def test_run_names_the_throttled_host_in_its_link_check():
    done = on_hosts(4, {"*": FAST, "h4": SLOW},
                    ["run", "--collectives", "all_to_all", "-b", "2M", "-e", "2M", "-n", "3",
                     "-w", "1", "-c", "0", "--probe-iters", "10"])
    assert done.returncode == 0, show(done)
    assert "# links between hosts at 2 MiB" in done.stdout
    assert [line.split()[3].rstrip(":") for line in slow_host_lines(done.stdout)] == ["h4"], done.stdout
    assert "its slow links" in done.stdout and "h1 -> h4" in done.stdout


@needs_hosts
def test_run_names_nobody_when_links_are_equal():
    done = on_hosts(3, FAST, ["run", "--collectives", "all_to_all", "-b", "2M", "-e", "2M",
                              "-n", "3", "-w", "1", "-c", "0", "--probe-iters", "10"])
    assert done.returncode == 0, show(done)
    assert "# links between hosts" in done.stdout
    assert "SLOW" not in done.stdout, done.stdout


@needs_hosts
def test_doctor_on_two_hosts_lists_differences_and_findings(tmp_path):
    # h2 gets its own NCCL variable and a slower NIC in its fabricated tree.
    make_tree(tmp_path / "h1", nics=[("eth0", "up", 100000)])
    make_tree(tmp_path / "h2", nics=[("eth0", "up", 10000)])
    js = tmp_path / "doctor.json"
    script = ('[ "$(hostname)" = h2 ] && export NCCL_IB_HCA=mlx5_1; '
              f'exec {PYTHON} -m mpibench doctor --sys-root "{tmp_path}/{{host}}" --json {js}')
    with fakecluster.FakeCluster(hosts=2) as c:
        done = c.mpirun(["/bin/sh", "-c", script], ppn=1, env=base_env(), timeout=120)
    assert done.returncode == 0, show(done)
    assert "DIFFERS variable NCCL_IB_HCA: h1=(unset), h2=mlx5_1" in done.stdout, done.stdout
    assert "DIFFERS interface eth0 speed: h1=100000 Mb/s, h2=10000 Mb/s" in done.stdout
    assert any(line.strip().startswith("#   h2: fastest network interface is 10000 Mb/s")
               for line in done.stdout.splitlines()), done.stdout
    doc = json.loads(js.read_text())
    assert set(doc["doctor"]["hosts"]) == {"h1", "h2"}


def test_real_logs_name_the_aws_plugin_and_nvls_set_up_or_used():
    """04: NCCL 2.22.3 on 2 p5 hosts (aws-ofi-nccl, 'via NET/AWS Libfabric/0/GDRDMA'): the
    plugin by its whole name, NVLS used. 17: NCCL 2.20.3 on the same hosts: its NVLS lines
    come from init, so NVLS is only set up."""
    text, hosts = _real_log("04")
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], hosts)
    assert found[("test-nccl-worker-0", "test-nccl-worker-1")] == ["NET/AWS Libfabric"], found
    assert "NVLS" in found[("test-nccl-worker-1",) * 2], found
    text, hosts = _real_log("17")
    assert "NCCL version 2.20.3" in text
    found = ncclinfolog.by_host_pair([ncclinfolog.parse(text)], hosts)
    assert found[("test-nccl-worker-0", "test-nccl-worker-1")] == ["NET/AWS Libfabric"], found
    for h in ("test-nccl-worker-0", "test-nccl-worker-1"):
        assert "NVLS (set up)" in found[(h, h)] and "NVLS" not in found[(h, h)], found

"""--metrics FILE: every command's file passes `promtool check metrics`, and a figure goes the
whole way an operator's does: node_exporter's textfile collector, a Prometheus server
scraping it, its HTTP API. The Debian packages prometheus and prometheus-node-exporter
(`make test-deps`) provide the binaries; without them these tests skip and say so."""
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, check_usage_error, lone, mpirun, show
from mpibench.results import metrics

TOOLS = ("promtool", "prometheus", "prometheus-node-exporter")
MISSING = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = pytest.mark.usefixtures("procs")       # five mpirun jobs, two servers
needs_tools = pytest.mark.skipif(bool(MISSING), reason=f"missing {', '.join(MISSING)} "
                                 f"(Debian packages prometheus, prometheus-node-exporter: make test-deps)")

# One small job per command that takes --metrics, 2 ranks each.
JOBS = {
    "run": (2, ["run", "--collectives", "all_reduce", "-b", "1K", "-e", "2K", "-n", "2", "-w", "1"]),
    "check": (2, ["check", "-b", "64K", "-n", "2", "-w", "1"]),
    "p2p": (2, ["p2p", "--every-rank", "-b", "64K", "-n", "2", "--latency-iters", "3"]),
    "train": (2, ["train", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16",
                   "--vocab", "128", "--batch", "1", "-n", "1", "-w", "1", "--alone-iters", "1"]),
    "verify": (2, ["verify", "--sizes", "64K", "--rounds", "1", "-n", "2", "-w", "1",
                   "--iperf-seconds", "1"]),
}


@pytest.fixture(scope="module")
def prom_files(procs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("textfile")
    files = {"run.json": tmp_path_factory.mktemp("json") / "run.json"}
    for name, (np, args) in JOBS.items():
        path = folder / f"mpibench-{name}.prom"
        extra = ["--json", str(files["run.json"])] if name == "run" else []
        done = mpirun(np, args + extra + ["--metrics", str(path)], timeout=180)
        assert done.returncode == 0, show(done)
        assert f"# Writing metrics to {path} (replaced whole at each write)" in done.stdout, show(done)
        files[name] = path
    assert not [p for p in folder.iterdir() if not p.name.endswith(".prom")]   # no temporary left
    return files


def _samples(text):
    """{(name, labels as text): value} of a Prometheus text file."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m:
            out[(m[1], m[2])] = float(m[3])
    return out


@needs_tools
def test_every_commands_metrics_pass_promtool_and_are_documented(prom_files):
    documented = set(re.findall(r"^\| `(mpibench_\w+)` \|", (Path(ROOT) / "docs" / "metrics.md")
                                .read_text(), re.M))
    assert documented == set(metrics.METRICS)
    for name in JOBS:
        path = prom_files[name]
        text = path.read_text()
        done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0 and not done.stdout + done.stderr, (name, done.stderr, text)
        names = {n for n, _ in _samples(text)}
        assert names <= set(metrics.METRICS)
        assert f'mpibench_info{{command="{name}",version=' in text
        assert f'mpibench_exit_code{{command="{name}"}} 0' in text
    want = {"run": "mpibench_rank_time_seconds", "check": "mpibench_check_host_passed",
            "p2p": "mpibench_link_latency_seconds", "train": "mpibench_train_tokens_per_second",
            "verify": "mpibench_verify_check_passed"}
    for name, metric in want.items():
        assert metric in {n for n, _ in _samples(prom_files[name].read_text())}, name
    # the figures are the ones the command measured: its JSON document holds the same
    doc = json.loads(prom_files["run.json"].read_text())
    got = _samples(prom_files["run"].read_text())
    for row in doc["results"]:
        labels = (f'command="run",collective="all_reduce",message_size="{row["size"]}",'
                  f'dtype="float32",mode="in",n_nodes="1",nranks="2"')
        assert got[("mpibench_collective_busbw_bytes_per_second", labels)] == \
            pytest.approx(row["in_place"]["busbw_GBps"] * 1e9, rel=1e-12)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def _wait(what, probe, seconds, procs):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for p in procs:
            assert p.poll() is None, f"{p.args[0]} ended ({p.returncode}) before {what}"
        try:
            got = probe()
            if got:
                return got
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"no {what} after {seconds} s")


@needs_tools
def test_a_figure_reaches_prometheus_through_node_exporter(prom_files, tmp_path):
    text = prom_files["run"].read_text()
    key = next(k for k in _samples(text) if k[0] == "mpibench_collective_busbw_bytes_per_second"
               and 'message_size="2048"' in k[1])
    value = _samples(text)[key]
    exporter_port, prom_port = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: node\n"
                      f"    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n")
    procs = []
    try:
        procs.append(subprocess.Popen(
            ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{exporter_port}",
             "--collector.disable-defaults", "--collector.textfile",
             f"--collector.textfile.directory={prom_files['run'].parent}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        scraped = _wait("metrics from node_exporter", lambda: "mpibench_info" in _get(
            f"http://127.0.0.1:{exporter_port}/metrics") and "ok", 30, procs)
        assert scraped
        query = f'{key[0]}{{command="run",collective="all_reduce",message_size="2048"}}'
        url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        result = _wait("the figure in Prometheus", lambda: json.loads(_get(url))["data"]["result"],
                       60, procs)
        assert len(result) == 1, result
        assert result[0]["metric"]["job"] == "node" and result[0]["metric"]["mode"] == "in"
        assert float(result[0]["value"][1]) == pytest.approx(value, rel=1e-12)
        # the queries docs/metrics.md shows are ones Prometheus accepts
        page = (Path(ROOT) / "docs" / "metrics.md").read_text()
        queries = [q for block in re.findall(r"```promql\n(.*?)```", page, re.S)
                   for q in re.split(r"\n(?=\S)", block.strip())]
        assert len(queries) >= 4, queries
        for q in queries:
            answer = json.loads(_get(f"http://127.0.0.1:{prom_port}/api/v1/query?"
                                     + urllib.parse.urlencode({"query": q})))
            assert answer["status"] == "success", (q, answer)
        # every command's file is read from the one folder, none refused by the collector
        errors = _get(f"http://127.0.0.1:{exporter_port}/metrics")
        assert "node_textfile_scrape_error 0" in errors, errors[-2000:]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _pair(partner, rnd, rail, gbps, passed):
    return {"partner": partner, "round": rnd, "rail": rail, "busbw_GBps": gbps, "passed": passed}


@needs_tools
def test_check_verdicts_per_host_rail_and_link_without_processes():
    # check's document as checkjudge writes it: h2's rail 1 failed (kept, RAIL), h3 failed
    # on every rail (FAIL), an uplink suspect
    hosts = [{"host": "h1", "verdict": "PASS", "rails_failed": [], "intra": None,
              "pairs": [_pair("h2", 1, 0, 40.1, True), _pair("h2", 1, 1, 9.5, False)]},
             {"host": "h2", "verdict": "RAIL", "rails_failed": [1], "intra": None,
              "pairs": [_pair("h1", 1, 0, 40.1, True), _pair("h1", 1, 1, 9.5, False)]},
             {"host": "h3", "verdict": "FAIL", "rails_failed": [], "intra": None,
              "pairs": [_pair("h4", 1, 0, 3.0, False), _pair("h4", 1, 1, 3.1, False)]}]
    check = {"config": {"collective": "all_reduce", "size": 1 << 30}, "hosts": hosts,
             "failing_hosts": ["h3"], "suspects": ["h2 rail 1 (eth1, its link to leaf1)",
                                                  "uplink leaf2-spine1"]}
    text = metrics.render({"command": "check", "check": check, "exit": {"code": 1}})
    done = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and not done.stdout + done.stderr, (done.stderr, text)
    got = {(n, labels.replace('command="check",', "")): v for (n, labels), v in _samples(text).items()}
    assert _samples(text)[("mpibench_check_passed", 'command="check"')] == 0
    assert got[("mpibench_check_host_passed", 'node="h2",verdict="RAIL"')] == 0
    assert got[("mpibench_check_host_passed", 'node="h1",verdict="PASS"')] == 1
    assert got[("mpibench_check_rail_passed", 'node="h2",rail="1"')] == 0
    assert got[("mpibench_check_rail_passed", 'node="h2",rail="0"')] == 1
    assert got[("mpibench_check_rail_passed", 'node="h3",rail="0"')] == 0
    assert got[("mpibench_check_pair_busbw_bytes_per_second",
                'node="h1",peer_node="h2",rail="1",round="1"')] == 9.5e9
    assert got[("mpibench_check_suspect", 'link="h2 rail 1 (eth1, its link to leaf1)",'
                                          'kind="host_rail"')] == 1
    assert got[("mpibench_check_suspect", 'link="uplink leaf2-spine1",kind="uplink"')] == 1


def test_a_folder_is_no_metrics_file(tmp_path):
    check_usage_error(lone(["run", "-b", "1K", "-e", "1K", "--metrics", str(tmp_path)]),
                      "it is a folder", 60)

"""The physical limit of every path and the published figures per platform: the parsers on a
fabricated sysfs tree and nvidia-smi answers (launch/fakesysfs.py), the data file's entries each
whole and sourced, and `run`, `doctor` and `check` under a real mpirun with the test switch
hostfacts:RANK:DIR putting the fabricated host (8 x H100, NVLink, one GPU downtrained to x8,
one with NVLink links down) in place of this one's."""
import glob
import json
import os

import pytest

from conftest import check_usage_error, mpirun, show
from mpibench.diagnose import pathlimits
from mpibench.results import published

import fakesysfs  # noqa: E402  (launch/, on sys.path by conftest)

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def faulty(tmp_path):
    """A fabricated 8 x H100 host: GPU 2's PCIe link at x8 of x16, GPU 5 with 2 of 18 NVLink
    links down, 4 x 400 Gb/s NICs."""
    return fakesysfs.build(str(tmp_path / "host"), downtrained={2: 8}, nvlink_down={5: 2})


# ---------------------------------------------------------------- parsers (logic)
def test_pcie_rates_per_generation():
    assert pathlimits.pcie_rate("16.0 GT/s PCIe") == 16.0 and pathlimits.pcie_rate("8 GT/s") == 8.0
    assert pathlimits.pcie_rate("Unknown") is None and pathlimits.pcie_rate(None) is None
    assert pathlimits.pcie_GBps(16.0, 16) == pytest.approx(31.51, abs=0.01)   # Gen4 x16, 128b/130b
    assert pathlimits.pcie_GBps(16.0, 8) == pytest.approx(15.75, abs=0.01)    # downtrained: half
    assert pathlimits.pcie_GBps(2.5, 1) == pytest.approx(0.25)                # Gen1, 8b/10b
    assert pathlimits.pcie_GBps(3.0, 16) is None                              # not a PCIe rate
    assert pathlimits.pcie_name(32.0, 16) == "PCIe Gen5 x16"


def test_nvlink_status_parsed_with_inactive_links():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n")
    got = pathlimits.parse_nvlink(text)
    assert got["GPU 0"] == {"up": 2, "down": 0, "per_link": 26.562, "GBps": pytest.approx(53.124)}
    assert got["GPU 1"]["up"] == 1 and got["GPU 1"]["down"] == 1


def test_fabricated_host_gives_limits_and_findings(faulty):
    paths = pathlimits.collect(faulty, faulty)
    assert len(paths["gpus"]) == 8 and len(paths["nics"]) == 4 and paths["unknown"] == []
    assert paths["gpus"][0]["name"] == H100
    assert paths["gpus"][2]["pcie"]["width"] == 8 and paths["gpus"][2]["pcie"]["max_width"] == 16
    # every GPU's nearest NIC is the one under its own PCIe switch
    assert [g["nic"] for g in paths["gpus"]] == [f"mlx5_{i // 2}/1" for i in range(8)]
    assert {g["nic_path"] for g in paths["gpus"]} == {"PXB"}
    intra, inter = paths["intra"], paths["inter"]
    assert intra["name"] == "8 x 16 NVLink 4 links"          # the slowest GPU's links
    assert intra["GBps"] == pytest.approx(16 * 26.562)
    assert inter == {"GBps": 200.0, "via": "NICs", "name": "4 x 400 Gb/s NICs"}
    found = [t for _, t in pathlimits.findings("h1", paths)]
    assert len(found) == 2, found
    assert "GPU 0000:13:00.0's PCIe link runs at PCIe Gen4 x8, below its maximum PCIe Gen4 x16" in found[0]
    assert "has 16 NVLink links up, 2 down, the host's other GPUs 18" in found[1]


def test_healthy_host_has_no_findings_and_a_slow_slot_is_named(tmp_path):
    healthy = fakesysfs.build(str(tmp_path / "ok"))
    assert pathlimits.findings("h1", pathlimits.collect(healthy, healthy)) == []
    assert pathlimits.collect(healthy, healthy)["intra"]["name"] == "8 x 18 NVLink 4 links"
    # a GPU whose link is at its own maximum, below its peers': a slower slot, not a downtrained link
    slot = fakesysfs.build(str(tmp_path / "slot"))
    gpu = glob.glob(os.path.join(slot, "sys/devices/*/*/0000:14:00.0"))[0]
    for name in ("current_link_width", "max_link_width"):
        with open(os.path.join(gpu, name), "w") as f:
            f.write("8\n")
    found = [t for _, t in pathlimits.findings("h1", pathlimits.collect(slot, slot))]
    assert found == ["GPU 0000:14:00.0's PCIe link is PCIe Gen4 x8 (15.8 GB/s), its peers reach "
                     "31.5 GB/s: it sits in a slower slot"], found


def test_missing_link_files_are_unknown_with_the_reason(tmp_path):
    tree = fakesysfs.build(str(tmp_path / "vm"), gpus=0, nics=1)
    for f in glob.glob(os.path.join(tree, "sys/devices/**/*_link_*"), recursive=True):
        os.remove(f)
    paths = pathlimits.collect(tree, tree)
    assert paths["nics"][0]["pcie"] == {"unknown": "no current_link_speed, current_link_width, "
                                        "max_link_speed, max_link_width under /sys/bus/pci/devices/"
                                        "0000:50:00.0"}
    assert any("none of the 1 PCI devices under /sys/bus/pci/devices has current_link_speed" in u
               for u in paths["unknown"]), paths["unknown"]
    assert paths["intra"] is None and pathlimits.findings("h1", paths) == []
    lim, why = pathlimits.limit({"h1": paths}, False)
    assert lim is None and why == "h1: NVLink or PCIe link of every GPU unknown"


def test_this_machine_says_what_it_cannot_read():
    paths = pathlimits.collect("/")
    links = glob.glob("/sys/bus/pci/devices/*/current_link_speed")
    if links:
        pytest.skip(f"this machine's PCI devices have link-speed files ({len(links)})")
    assert any("has current_link_speed (virtual devices" in u for u in paths["unknown"]), paths


# ---------------------------------------------------------------- the data file (logic)
def test_every_published_entry_is_whole_and_sourced():
    entries = published.load()
    assert len(entries) >= 10
    for e in entries:
        assert published.problems(e) == [], e
        assert e["source"]["url"].startswith("https://"), e
    seen = {(e["platform"]["gpu"], e["platform"]["hosts"] > 1) for e in entries}
    for gpu in ("A100", "H100", "H200", "B200", "GB200", "MI300X"):
        assert (gpu, False) in seen, gpu                       # one host
    for gpu in ("A100", "H100", "H200", "B200", "GB200"):
        assert (gpu, True) in seen, gpu                        # several


def test_an_entry_without_source_or_unit_fails(tmp_path):
    good = published.load()[0]
    no_source = {k: v for k, v in good.items() if k != "source"}
    no_unit = {k: v for k, v in good.items() if k != "unit"}
    no_url = dict(good, source={"name": "x", "date": "2024"})
    assert "source needs name, url and date" in published.problems(no_source)
    assert "unit must be GB/s (nccl-tests' busbw)" in published.problems(no_unit)
    assert published.problems(no_url) and published.problems(dict(good, busbw_GBps=0))
    path = tmp_path / "published.json"
    path.write_text(json.dumps({"entries": [good, no_source]}))
    with pytest.raises(ValueError, match="entry 2: source needs name, url and date"):
        published.load(str(path))


def test_platforms_match_by_model_count_and_hosts():
    entries = published.load()
    plat = published.platform([H100] * 8, 8, 1)
    found = published.match(entries, plat, "all_reduce")
    assert sorted(e["busbw_GBps"] for e in found) == [370, 460, 480]
    text = published.range_text(found, plat, "all_reduce")
    assert text.startswith("published for 8 x H100 SXM5 (NVLink 4 (NVSwitch)), one host, all_reduce: "
                           "370 (Ring) - 480 (NVLS) GB/s at 8 GiB, 16 GiB (2 sources)"), text
    assert published.match(entries, published.platform(["NVIDIA GH200 480GB"], 1, 1), "all_reduce") == []
    assert published.match(entries, published.platform(["NVIDIA H100 PCIe"], 8, 1), "all_reduce") == []
    assert published.match(entries, published.platform([H100] * 4, 4, 1), "all_reduce") == []
    two = published.match(entries, published.platform(["NVIDIA B200"], 8, 2), "all_gather")
    assert [e["busbw_GBps"] for e in two] == [250]
    nothing = published.range_text([], published.platform([], 0, 1), "all_reduce")
    assert nothing.startswith("published: nothing matches no GPUs, one host, all_reduce")
    assert published.floor(found)["min_busbw_GBps"] == 370.0


# ---------------------------------------------------------------- under mpirun
def switch(tree):
    return {"MPIBENCH_FAULT": f"hostfacts:0:{tree}"}


@pytest.mark.usefixtures("procs")
def test_run_shows_shares_of_the_limit_findings_and_the_published_range(faulty, tmp_path):
    js = tmp_path / "run.json"
    done = mpirun(2, ["run", "--collectives", "all_reduce,all_gather", "-b", "1K", "-e", "64K", "-n", "2",
                      "-w", "1", "--json", str(js)], env=switch(faulty))
    assert done.returncode == 0, show(done)
    out = done.stdout
    assert f"# TEST SWITCHES ACTIVE: MPIBENCH_FAULT=hostfacts:0:{faulty}" in out
    assert ("path limits " in out and "inside the host 8 x 16 NVLink 4 links = 425.0 GB/s, "
            "between hosts 4 x 400 Gb/s NICs = 200.0 GB/s" in out), show(done)
    assert "WARNING GPU 0000:13:00.0's PCIe link runs at PCIe Gen4 x8" in out, show(done)
    assert "# busbw against the path's limit: 8 x 16 NVLink 4 links = 425.0 GB/s each way" in out
    assert "of 8 x 16 NVLink 4 links" in out
    assert "# published for 8 x H100 SXM5 (NVLink 4 (NVSwitch)), one host, all_reduce: 370 (Ring) - " \
           "480 (NVLS) GB/s at 8 GiB, 16 GiB (2 sources); measured" in out, show(done)
    assert "#   460 GB/s threshold at 16 GiB: Azure NHC, ND96isr H100 v5 (https://github.com/Azure/" in out
    assert "# published: nothing matches 8 x NVIDIA H100 80GB HBM3, one host, all_gather" in out
    doc = json.loads(js.read_text())
    limit = doc["path_limits"]["limit"]["GBps"]
    share = [m["busbw_GBps"] / limit for row in doc["results"] for m in (row["out_of_place"], row["in_place"])
             if m]
    assert all(0 < s < 1 for s in share), share
    assert len(doc["published"]["collectives"]["all_reduce"]) == 3
    again = mpirun(1, ["report", str(js)])        # the document alone gives the same lines back
    assert again.returncode == 0, show(again)
    assert "# busbw against the path's limit: 8 x 16 NVLink 4 links" in again.stdout
    assert "(2 sources); measured" in again.stdout


@pytest.mark.usefixtures("procs")
def test_run_on_this_machine_says_what_is_unknown_and_that_nothing_matches():
    done = mpirun(2, ["run", "--collectives", "all_reduce", "-e", "1K", "-n", "2", "-w", "1"])
    assert done.returncode == 0, show(done)
    assert "published: nothing matches no GPUs, one host, all_reduce" in done.stdout
    assert ("share of the path's limit: not shown, the limit is unknown" in done.stdout), show(done)


@pytest.mark.usefixtures("procs")
def test_doctor_names_the_downtrained_link_and_the_nvlink_down(faulty, tmp_path):
    js = tmp_path / "doctor.json"
    done = mpirun(2, ["doctor", "--no-nccl", "--json", str(js)], env=switch(faulty))
    assert done.returncode == 0, show(done)     # warnings: runs work, slower
    assert "#   paths       GPU 0000:11:00.0 NVIDIA H100 80GB HBM3: PCIe Gen4 x16 (31.5 GB/s) of PCIe " \
           "Gen4 x16; NVLink 18 links up x 26.562 GB/s = 478 GB/s; nearest NIC mlx5_0/1 (PXB)" in done.stdout
    assert "limit between hosts: 4 x 400 Gb/s NICs = 200.0 GB/s" in done.stdout
    found = [f["text"] for f in json.loads(js.read_text())["doctor"]["findings"]]
    assert any("below its maximum PCIe Gen4 x16 (15.8 of 31.5 GB/s): a downtrained link" in t for t in found)
    assert any("GPU 0000:96:00.0 has 16 NVLink links up, 2 down" in t for t in found), found


@pytest.mark.usefixtures("procs")
def test_doctor_on_this_machine_says_the_link_files_are_missing():
    if glob.glob("/sys/bus/pci/devices/*/current_link_speed"):
        pytest.skip("this machine's PCI devices have link-speed files")
    done = mpirun(2, ["doctor", "--no-nccl"])
    assert done.returncode == 0, show(done)
    assert "has current_link_speed (virtual devices, as in most VMs)" in done.stdout, show(done)


@pytest.mark.usefixtures("procs")
def test_check_expect_published_takes_its_floor_from_the_source_and_joins_the_findings(faulty, tmp_path):
    js = tmp_path / "check.json"
    done = mpirun(2, ["check", "-b", "64K", "-n", "2", "-w", "1", "--expect", "published",
                      "--json", str(js)], env=switch(faulty))
    assert done.returncode == 1, show(done)     # CPU ranks are far below 8 x H100's 460 GB/s
    out = done.stdout
    assert ("# threshold intra: min_busbw_GBps 460 (published: Azure NHC, ND96isr H100 v5, "
            "https://github.com/Azure/azurehpc-health-checks/blob/") in out, show(done)
    assert "# published for 8 x H100 SXM5" in out
    doc = json.loads(js.read_text())
    reasons = " ".join(r for h in doc["check"]["hosts"] for r in h["reasons"])
    assert "busbw" in reasons and "< 460 GB/s (published: Azure NHC" in reasons, reasons
    assert "link below its rating: GPU 0000:13:00.0's PCIe link runs at PCIe Gen4 x8" in reasons


@pytest.mark.usefixtures("procs")
def test_check_expect_published_with_nothing_matching_is_one_clear_line():
    done = mpirun(2, ["check", "-b", "1K", "-n", "1", "-w", "0", "--expect", "published"])
    check_usage_error(done, "--expect published: nothing published matches no GPUs, one host", 60)

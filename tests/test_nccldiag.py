"""NCCL 2.31's own diagnostics in doctor: the `NCCL DIAG` lines (in the shapes NCCL's sources
print them, tests/data/nccl-diag-2.31*.txt) turned into findings naming host and GPU; on a
machine without NCCL >= 2.31 doctor says the check needs it."""
import json
import os

import pytest

from conftest import ROOT, mpirun, show

from mpibench.diagnose import nccldiag
from mpibench.diagnose.findings import ERROR, WARNING

DATA = os.path.join(ROOT, "tests", "data")
# the sample job: ranks 0, 1 on node01, ranks 2, 3 on node02, each on its local GPU 0 or 1
WHERE = [("node01", 0), ("node01", 1), ("node02", 0), ("node02", 1)]


def sample(name="nccl-diag-2.31.txt"):
    with open(os.path.join(DATA, name)) as f:
        return nccldiag.parse(f.read())


def found():
    return [(f.severity, f[0], f[1]) for f in nccldiag.findings(sample(), WHERE)]


def one(words):
    hits = [f for f in found() if words in f[2]]
    assert len(hits) == 1, (words, found())
    return hits[0]


def test_every_diag_line_is_read_once_with_its_level_and_check():
    lines = sample()
    assert [x.check for x in lines][:3] == ["GPU inventory", "CUDA driver version", "CUDA driver version"]
    assert {x.level for x in lines} == {"OK", "INFO"}
    assert lines[2].host == "node01"                 # a RAS line's host:pid prefix
    assert nccldiag.parse("NCCL DIAG [OK]   p2p: all 2 directed GPU P2P edges verified\n" * 3)[0].text == \
        "all 2 directed GPU P2P edges verified"      # every rank prints it: once
    assert nccldiag.parse("NCCL INFO Channel 00/02 : 0 1\nNCCL WARN something\n") == []


def test_gpu_and_driver_that_differ_name_their_hosts_and_gpus():
    sev, host, text = one("GPU inventory model differs")
    assert (sev, host) == (WARNING, "node02")
    assert "rank 2 (node02 GPU 0), rank 3 (node02 GPU 1) differ from rank 0 (node01 GPU 0)" in text
    assert "NVIDIA H100 80GB HBM3" in text
    sev, host, text = one("CUDA driver version differs")
    assert (sev, host) == (ERROR, "node02") and "rank 3 (node02 GPU 1) differs" in text and "12090" in text


def test_ecc_errors():
    sev, host, text = one("uncorrected ECC errors")
    assert (sev, host) == (ERROR, "node01") and "rank 1 (node01 GPU 1)" in text and "worst 3" in text
    sev, host, _ = one("corrected ECC errors on rank 2")
    assert (sev, host) == (WARNING, "node02")


def test_nvlink_down_and_link_count():
    sev, host, text = one("NVLink down")
    assert (sev, host) == (ERROR, "node02") and "rank 2 (node02 GPU 0)" in text
    assert one("NVLink link-count differs")[1] == "node02"


def test_xid_and_sxid_name_their_host_and_an_ok_one_is_no_finding():
    sev, host, text = one("Xid 79 reported 2 times")
    assert (sev, host) == (ERROR, "node02") and "resetting the affected GPU" in text
    sev, host, text = one("SXid 12028 reported at least 65535 times")
    assert (sev, host) == (ERROR, "node02") and "link(s) {3,7}" in text
    assert not [f for f in found() if "Xid 63" in f[2]]            # tagged OK: no user action
    assert not [f for f in found() if "kernel-log" in f[2]]        # unknown is not a problem


def test_p2p_paths_that_failed_name_both_ends():
    sev, host, text = one("write mismatch")
    assert (sev, host) == (ERROR, "node01")
    assert "from rank 0 (node01 GPU 0) to rank 1 (node01 GPU 1), path NVL" in text
    assert "nvidia-smi topo -p2p n" in text
    sev, host, text = one("peer-memory import failed")
    assert host == "node02" and "from rank 3 (node02 GPU 1) to rank 2 (node02 GPU 0)" in text
    assert one("only 2 of 4 directed GPU P2P paths")[0] == ERROR


def test_a_variable_set_on_some_ranks_only():
    sev, host, text = one("NCCL_IB_HCA is not the same on every rank")
    assert (sev, host) == (WARNING, None)
    assert "mlx5_0,mlx5_1 on rank 0 (node01 GPU 0), rank 1 (node01 GPU 1)" in text
    assert "(unset) on rank 2 (node02 GPU 0), rank 3 (node02 GPU 1)" in text


def test_nothing_left_unread_in_the_sample_and_a_healthy_job_has_no_finding():
    assert not [f for f in found() if f[2].startswith("unread")], found()
    assert nccldiag.findings(sample("nccl-diag-2.31-healthy.txt"), WHERE[:2]) == []


def test_a_line_of_an_unknown_shape_is_kept_not_dropped():
    lines = nccldiag.parse("NCCL DIAG [INFO] IOMMU: something new on rank(s) {1}\n")
    (f,) = nccldiag.findings(lines, WHERE)
    assert f[1] == "unread NCCL diagnostic: NCCL DIAG IOMMU: something new on rank(s) {1}"


def test_truncated_rank_sets_say_how_many_more():
    lines = nccldiag.parse("NCCL DIAG [INFO] ECC: uncorrected volatile errors on rank(s) "
                           "{0,1,2,3,...} (N=12) (worst=1) across 16 ranks in comm 0x1\n")
    (f,) = nccldiag.findings(lines, WHERE)
    assert "rank 3 (node02 GPU 1) and 8 more" in f[1] and f[0] is None


@pytest.mark.parametrize("version,ok", [((2, 31, 0), True), ((2, 32, 1), True), ((2, 30, 7), False),
                                        ((2, 21, 5), False), (None, False)])
def test_the_version_gate(version, ok):
    assert nccldiag.version_ok(version) is ok


@pytest.mark.usefixtures("procs")
def test_doctor_on_cpu_says_the_check_needs_nccl_2_31(tmp_path):
    out = tmp_path / "doctor.json"
    done = mpirun(2, ["doctor", "--json", str(out)], timeout=180)
    assert done.returncode == 0, show(done)
    assert "# NCCL diagnostics (NCCL_RUN_RAS_DIAGNOSTICS=1, NCCL_RUN_DIAGNOSTICS=1):" in done.stdout
    assert "#   not run: NCCL's diagnostics (NCCL_RUN_RAS_DIAGNOSTICS, NCCL_RUN_DIAGNOSTICS) need " \
           "NCCL >= 2.31; this job's: none found" in done.stdout, show(done)
    diag = json.loads(out.read_text())["doctor"]["nccl_diagnostics"]
    assert diag["run"] is False and diag["lines"] == [] and "NCCL >= 2.31" in diag["why"]

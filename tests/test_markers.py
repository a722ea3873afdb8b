"""The test markers select what they say (pytest --collect-only: nothing is run)."""
import subprocess

from conftest import PYTHON, ROOT

FILES = ["tests/test_fakecluster.py", "tests/test_run.py", "tests/gpu/test_gpu_one.py",
         "tests/gpu/test_gpu_multi.py", "tests/gpu/test_gpu_verify.py", "tests/test_layout.py"]


def collected(expr):
    done = subprocess.run([PYTHON, "-m", "pytest", "--collect-only", "-q", "--strict-markers",
                           "-p", "no:cacheprovider", "-m", expr] + FILES,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 5), done.stdout + done.stderr    # 5: nothing selected
    return {line.split("::")[0] + "::" + line.split("::")[1].split("[")[0]
            for line in done.stdout.splitlines() if "::" in line}


def test_markers_select_by_file_and_by_what_a_test_starts():
    cluster = collected("cluster")
    assert "tests/test_run.py::test_per_host_table_names_the_hosts" in cluster
    assert any(t.startswith("tests/test_fakecluster.py::") for t in cluster)
    assert not any(t.startswith("tests/test_layout.py") for t in cluster)
    # a GPU test is a cluster test only when it starts hosts
    assert {t for t in cluster if t.startswith("tests/gpu/")} == \
        {"tests/gpu/test_gpu_multi.py::test_two_namespace_hosts_of_two_gpus"}
    assert "tests/test_run.py::test_fnum_prints_as_nccl_tests_printed" not in cluster
    gpu = collected("gpu")
    assert gpu and all(t.startswith("tests/gpu/") for t in gpu)
    assert {t.split("::")[0] for t in gpu} == set(FILES[2:5])
    quick = collected("not cluster and not slow and not gpu")
    assert "tests/test_run.py::test_fnum_prints_as_nccl_tests_printed" in quick
    assert not quick & (cluster | gpu)

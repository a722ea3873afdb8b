"""The parts of the suite: a test's marker follows the fixture it takes (procs, hosts, slurm;
none: logic), and a logic test that starts a process fails, saying which fixture to take."""
import subprocess

import pytest

from conftest import PYTHON, ROOT

pytestmark = pytest.mark.usefixtures("procs")

FILES = ["tests/test_fakecluster.py", "tests/test_run.py", "tests/test_slurm.py",
         "tests/gpu/test_gpu_one.py", "tests/gpu/test_gpu_multi.py", "tests/test_layout.py"]


def collected(expr):
    done = subprocess.run([PYTHON, "-m", "pytest", "--collect-only", "-q", "--strict-markers",
                           "-p", "no:cacheprovider", "-m", expr] + FILES,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode in (0, 5), done.stdout + done.stderr    # 5: nothing selected
    return {line.split("::")[0] + "::" + line.split("::")[1].split("[")[0]
            for line in done.stdout.splitlines() if "::" in line}


def test_each_test_is_in_one_part_by_its_fixture():
    parts = {m: collected(m) for m in ("logic", "mpi", "hosts", "slurm")}
    every = collected("logic or mpi or hosts or slurm or not (logic or mpi or hosts or slurm)")
    assert set().union(*parts.values()) == every
    assert sum(map(len, parts.values())) == len(every)          # one part each
    assert "tests/test_run.py::test_fnum_prints_as_nccl_tests_printed" in parts["logic"]
    assert "tests/test_run.py::test_per_host_table_names_the_hosts" in parts["hosts"]
    assert "tests/test_run.py::test_bad_input" in parts["mpi"]
    assert all(t.startswith("tests/test_slurm.py::") for t in parts["slurm"]) and parts["slurm"]
    assert {t for t in parts["hosts"] if t.startswith("tests/gpu/")} == \
        {"tests/gpu/test_gpu_multi.py::test_two_namespace_hosts_of_two_gpus"}
    assert all(t.startswith("tests/test_layout.py") for t in parts["logic"]
               if "layout" in t) and not any("layout" in t for t in parts["mpi"])
    gpu = collected("gpu")
    assert gpu and all(t.startswith("tests/gpu/") for t in gpu)


def test_a_logic_test_that_starts_a_process_fails(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("import subprocess, sys\n\n"
                     "def test_starts():\n    subprocess.run([sys.executable, '-c', 'pass'])\n\n"
                     "def test_declares(procs):\n    subprocess.run([sys.executable, '-c', 'pass'])\n")
    done = subprocess.run([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           str(probe)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PYTHONPATH": f"{ROOT}/tests:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "test_starts starts a process: it must take the `procs` fixture" in done.stdout, done.stdout

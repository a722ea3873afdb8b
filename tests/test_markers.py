"""The parts of the suite: a test's marker follows the fixture it takes (procs, hosts, slurm;
none: logic), and a logic test that starts a process fails, saying which fixture to take."""
import os
import subprocess

import pytest

from conftest import PYTHON, ROOT

pytestmark = pytest.mark.usefixtures("procs")

FILES = ["tests/test_fakecluster.py", "tests/test_run.py", "tests/test_slurm.py",
         "tests/gpu/test_gpu_one.py", "tests/gpu/test_gpu_multi.py", "tests/test_layout.py"]


PARTS = ("logic", "mpi", "hosts", "slurm")

# One collection of FILES, selecting every part with -m; a plugin writes each test that -m
# selected with its markers, and each that it left out.
REPORT = """import os
def pytest_deselected(items):
    with open(os.environ["MARKERS_OUT"], "a") as f:
        f.writelines(f"{item.nodeid} deselected\\n" for item in items)
def pytest_collection_finish(session):
    with open(os.environ["MARKERS_OUT"], "a") as f:
        for item in session.items:
            f.write(item.nodeid + " " + " ".join(m.name for m in item.iter_markers()) + "\\n")
"""


def collected(tmp_path):
    """{test (no parameters): the markers of each of its cases}, as collected with
    --strict-markers and selected by `-m logic or mpi or hosts or slurm`."""
    (tmp_path / "markers_report.py").write_text(REPORT)
    out = tmp_path / "markers.txt"
    env = dict(os.environ, MARKERS_OUT=str(out),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([PYTHON, "-m", "pytest", "--collect-only", "-q", "--strict-markers",
                           "-p", "no:cacheprovider", "-p", "markers_report",
                           "-m", " or ".join(PARTS)] + FILES,
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    tests = {}
    for line in out.read_text().splitlines():
        nodeid, *markers = line.split()
        test = nodeid.split("::")[0] + "::" + nodeid.split("::")[1].split("[")[0]
        tests.setdefault(test, []).append(set(markers))
    return tests


def test_each_test_is_in_one_part_by_its_fixture(tmp_path):
    tests = collected(tmp_path)
    assert not [t for t, cases in tests.items() if {"deselected"} in cases]   # none partless
    every = set(tests)
    parts = {m: {t for t, cases in tests.items() if any(m in c for c in cases)} for m in PARTS}
    assert set().union(*parts.values()) == every
    assert sum(map(len, parts.values())) == len(every)          # one part each
    assert all(len(c & set(PARTS)) == 1 for cases in tests.values() for c in cases)
    assert "tests/test_run.py::test_fnum_prints_as_nccl_tests_printed" in parts["logic"]
    assert "tests/test_run.py::test_per_host_table_names_the_hosts" in parts["hosts"]
    assert "tests/test_run.py::test_bad_input" in parts["mpi"]
    assert all(t.startswith("tests/test_slurm.py::") for t in parts["slurm"]) and parts["slurm"]
    assert {t for t in parts["hosts"] if t.startswith("tests/gpu/")} == \
        {"tests/gpu/test_gpu_multi.py::test_two_namespace_hosts_of_two_gpus"}
    assert all(t.startswith("tests/test_layout.py") for t in parts["logic"]
               if "layout" in t) and not any("layout" in t for t in parts["mpi"])
    gpu = {t for t, cases in tests.items() if any("gpu" in c for c in cases)}
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

"""Every module the project starts with `python -m NAME`, and every script it starts by path,
exists: a module moved without its starters updated fails here, not on the first cluster."""
import importlib.util
import os
import re
import subprocess

import pytest

from conftest import PYTHON, ROOT

# `python -m NAME` in shell, Makefile and docs (pytest's `-m MARKER` is no module), and
# "-m", "NAME" in Python argument lists.
MODULE = re.compile(r"""(?:python[\w.]*\s+(?:-[A-Za-z]\S*\s+)*-m\s+|["']-m["']\s*,\s*["'])"""
                    r"([A-Za-z_][\w.]*)")
# Paths of the repository's own scripts, as written in commands and docs.
SCRIPT = re.compile(r"(?<![\w.-])(?<!mpibench/)((?:launch|sbatch|bench|tests/scripts)/"
                    r"[\w.-]+\.(?:py|sh|sbatch))\b")


def _tracked():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in names:
        if name.startswith("tests/data/") or name in ("tests/test_started_modules.py", "tests/test_docs.py") \
                or not os.path.isfile(os.path.join(ROOT, name)):
            continue
        with open(os.path.join(ROOT, name), errors="replace") as fh:
            yield name, fh.read()


def _started(pattern):
    found = {}
    for name, text in _tracked():
        for m in pattern.finditer(text):
            found.setdefault(m.group(1).rstrip("."), set()).add(name)
    return found


@pytest.mark.usefixtures("procs")
def test_the_scan_sees_the_starters():
    """The patterns find what they must (else the checks below would pass on nothing)."""
    assert MODULE.findall('[sys.executable, "-m", "mpibench.diagnose.ncclprobe"]') == \
        ["mpibench.diagnose.ncclprobe"]
    assert MODULE.findall("mpirun -np 2 python -m mpibench run") == ["mpibench"]
    assert MODULE.findall("$(PY) -m pytest -q -m cluster; python3 -u -m mpibench") == ["mpibench"]
    assert SCRIPT.findall("bash launch/mpirun.sh -np 2; see mpibench/launch/faults.py") == \
        ["launch/mpirun.sh"]
    modules = _started(MODULE)
    assert "mpibench" in modules and "mpibench.diagnose.ncclprobe" in modules, modules
    assert "launch/mpirun.sh" in _started(SCRIPT)


@pytest.mark.usefixtures("procs")
def test_every_module_started_with_dash_m_resolves():
    """Resolved in a fresh interpreter of the venv (find_spec imports parent packages)."""
    modules = sorted(_started(MODULE))
    code = ("import importlib.util, sys\n"
            "for m in sys.argv[1:]:\n"
            "    try:\n"
            "        ok = importlib.util.find_spec(m) is not None\n"
            "    except ImportError:\n"
            "        ok = False\n"
            "    print(m, ok)\n")
    done = subprocess.run([PYTHON, "-c", code] + modules, cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert done.returncode == 0, done.stderr
    missing = [line.split()[0] for line in done.stdout.splitlines() if line.endswith("False")]
    where = _started(MODULE)
    assert not missing, {m: sorted(where[m]) for m in missing}


@pytest.mark.usefixtures("procs")
def test_every_script_started_by_path_exists():
    """Paths are the repository's (launch/mpirun.sh) or, written short, the package's
    (launch/faults.py for mpibench/launch/faults.py)."""
    where = _started(SCRIPT)
    missing = {p: sorted(f) for p, f in where.items()
               if not any(os.path.exists(os.path.join(ROOT, top, p)) for top in ("", "mpibench"))}
    assert not missing, missing


def test_find_spec_would_have_caught_the_old_probe_name():
    assert importlib.util.find_spec("mpibench.ncclprobe") is None
    assert importlib.util.find_spec("mpibench.diagnose.ncclprobe") is not None

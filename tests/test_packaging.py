"""The package builds as a wheel and runs from it, away from the checkout.

A fresh venv gets the built wheel (no dependencies); torch, mpi4py, numpy and tabulate
come from the test's own venv through a .pth file, so nothing is downloaded. The checkout
must not be importable there: every module the commands need has to be in the wheel.
"""
import glob
import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import PYTHON, ROOT, base_env

pytestmark = pytest.mark.usefixtures("procs")


def clean_env(extra=None):
    """No PYTHONPATH: the checkout must not be seen by pip or by the fresh venv."""
    env = base_env({"PIP_DISABLE_PIP_VERSION_CHECK": "1", **(extra or {})})
    env.pop("PYTHONPATH", None)
    return env


def sh(cmd, cwd, env=None, timeout=120):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def build_wheel(out):
    os.makedirs(out, exist_ok=True)
    cmd = [PYTHON, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), ROOT]
    try:        # setuptools 70.1+ builds wheels itself: no download needed for the build
        import setuptools
        if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) >= (70, 1):
            cmd.insert(4, "--no-build-isolation")
    except ImportError:
        pass
    sh(cmd, cwd=out, env=clean_env(), timeout=300)
    wheels = glob.glob(os.path.join(out, "mpibench-*.whl"))
    assert len(wheels) == 1, os.listdir(out)
    return wheels[0]


def test_wheel_builds_and_runs_without_the_checkout(tmp_path):
    wheel = build_wheel(tmp_path / "dist")

    # Every module of the package is in the wheel.
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "mpibench", "**", "*.py"),
                                                           recursive=True)}
    assert modules and not modules - names, f"not in the wheel: {sorted(modules - names)}"
    data = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "mpibench", "data", "*"))}
    assert data and not data - names, f"package data not in the wheel: {sorted(data - names)}"

    venv = tmp_path / "fresh"
    sh([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    fresh = str(venv / "bin" / "python")
    sh([PYTHON, "-m", "pip", "--python", fresh, "install", "--no-deps", "--no-index", "-q", wheel],
       cwd=tmp_path, env=clean_env())
    site = subprocess.run([fresh, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies from this venv, after the fresh venv's own site-packages.
    ours = sysconfig.get_paths()["purelib"]
    (tmp_path / "fresh").joinpath(os.path.relpath(site, venv), "deps.pth").write_text(ours + "\n")

    env = clean_env()
    run_dir = tmp_path / "elsewhere"
    run_dir.mkdir()
    where = sh([fresh, "-c", "import mpibench; print(mpibench.__file__)"], cwd=run_dir, env=env)
    assert where.stdout.strip().startswith(site), f"mpibench imported from {where.stdout.strip()}"

    version = sh([fresh, "-m", "mpibench", "--version"], cwd=run_dir, env=env)
    assert version.stdout.startswith("mpibench ")
    assert sh([str(venv / "bin" / "mpibench"), "--version"], cwd=run_dir, env=env).stdout == version.stdout

    # One rank, no launcher: a process group on gloo, every stage imported from the wheel.
    info = sh([fresh, "-m", "mpibench", "info"], cwd=run_dir, env=env, timeout=120)
    assert "backend gloo" in info.stdout + info.stderr, info.stdout + info.stderr

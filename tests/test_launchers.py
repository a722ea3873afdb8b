"""Every way to start mpibench on one machine, for real: Open MPI 5 (pip) and 4 (Debian)
through launch/local.sh, MPICH hydra, torchrun and a lone python, each running `info`
and a small `run`; plus the command lines launch/mpirun.sh builds (version stubs only
answer `--version`, so those checks need no MPI at all)."""
import os
import shlex
import socket

import pytest

from launch_helpers import (LAUNCH, PY, TINY_RUN, VENV, assert_run_ok, ensure_mpich,
                            ensure_openmpi4, env, info_rows, run, run_doc)

pytestmark = pytest.mark.usefixtures("procs")

HOST = socket.gethostname()
needs_venv = pytest.mark.skipif(not (VENV / "bin" / "mpirun").exists(),
                                reason=f"no mpirun in {VENV} (make venv)")


# ---- launch/mpirun.sh command lines ----------------------------------------------
def _stub(tmp_path, version_line):
    """An 'mpirun' that only answers --version with the given line."""
    stub = tmp_path / "mpirun"
    stub.write_text(f"#!/bin/sh\necho {shlex.quote(version_line)}\n")
    stub.chmod(0o755)
    return stub


OMPI5 = "mpirun (Open MPI) 5.0.11"
OMPI4 = "mpirun.openmpi (OpenRTE) 4.1.4"
HYDRA = "HYDRA build details:"


def _dry(tmp_path, version, args, **extra):
    e = env(MPIRUN=_stub(tmp_path, version))
    for var in list(e):
        if var.startswith(("NCCL_", "GLOO_", "UCX_", "SLURM_")):
            del e[var]
    e.update(extra)
    r = run([LAUNCH / "mpirun.sh", "--dry-run", *args], env=e, timeout=30)
    assert r.returncode == 0, r.stderr
    return shlex.split(r.stdout)


def _pairs(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_mpirun_sh_hosts_ranks_and_forwarding(tmp_path):
    argv = _dry(tmp_path, OMPI5, ["--host", "n1:8,n2:8", "run", "-e", "64M"],
                NCCL_IB_HCA="mlx5_0", GLOO_SOCKET_IFNAME="eth0", UCX_TLS="rc",
                MPIBENCH_X="1", MASTER_PORT="29500", CUDA_VISIBLE_DEVICES="0,1",
                NOT_FORWARDED="1")
    assert argv[:3] == [str(tmp_path / "mpirun"), "--np", "16"]
    assert _pairs(argv, "--host") == ["n1:8,n2:8"]
    assert _pairs(argv, "--map-by") == ["ppr:8:node"]
    assert _pairs(argv, "--bind-to") == ["none"]
    forwarded = set(_pairs(argv, "-x"))
    assert {"NCCL_IB_HCA", "GLOO_SOCKET_IFNAME", "UCX_TLS", "MPIBENCH_X", "MASTER_PORT"} <= forwarded
    assert "NOT_FORWARDED" not in forwarded
    assert "CUDA_VISIBLE_DEVICES" not in forwarded      # each host has its own
    assert ("--allow-run-as-root" in argv) == (os.geteuid() == 0)
    assert argv[-6:] == [str(PY), "-m", "mpibench", "run", "-e", "64M"]


def test_mpirun_sh_hostfile_uneven_slots_and_odd_arguments(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# rack 1\nn1 slots=4\n\nn2:2\n")
    odd = ["info", "a b", "$(touch pwned)", "x;y", "*"]
    argv = _dry(tmp_path, OMPI5, ["--hostfile", hostfile, "--oversubscribe", "--", *odd])
    assert "--np" not in argv                      # all slots
    assert _pairs(argv, "--host") == ["n1:4,n2:2"]
    assert _pairs(argv, "--map-by") == ["slot:OVERSUBSCRIBE"]
    assert argv[-len(odd):] == odd                  # passed verbatim, never evaluated
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


@pytest.mark.parametrize("version,oob", [(OMPI4, ["--mca", "oob_tcp_if_include", "ib0"]),
                                         (OMPI5, ["--prtemca", "oob_tcp_if_include", "ib0"])])
def test_mpirun_sh_interface_option_names_differ_by_version(tmp_path, version, oob):
    argv = _dry(tmp_path, version, ["--host", "n1,n2", "--ppn", "2", "--iface", "ib0"])
    text = " ".join(argv)
    assert " ".join(oob) in text
    assert "--mca btl_tcp_if_include ib0" in text
    assert {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"} <= set(_pairs(argv, "-x"))
    assert _pairs(argv, "--np") == ["4"]


def test_mpirun_sh_hydra(tmp_path):
    argv = _dry(tmp_path, HYDRA, ["--host", "n1,n2", "--ppn", "4", "info"], NCCL_DEBUG="INFO")
    assert argv[1:7] == ["-n", "8", "-ppn", "4", "-hosts", "n1,n2"]
    assert "-x" not in argv and "--allow-run-as-root" not in argv  # hydra forwards all


def test_mpirun_sh_inside_allocation_takes_tasks_per_node(tmp_path):
    argv = _dry(tmp_path, OMPI5, ["info"], SLURM_JOB_ID="7", SLURM_TASKS_PER_NODE="4(x2)")
    assert _pairs(argv, "--map-by") == ["ppr:4:node"] and "--host" not in argv


@pytest.mark.parametrize("args,message", [
    (["--ppn", "0"], "--ppn needs a whole number"),
    (["--host", "a", "--hostfile", "/dev/null"], "not both"),
    (["--host", "bad;host"], "bad host name"),
    (["--bind", "everything"], "--bind"),
    (["--hostfile", "/nonexistent"], "cannot read hostfile"),
])
def test_mpirun_sh_bad_input_one_line_exit_2(tmp_path, args, message):
    r = run([LAUNCH / "mpirun.sh", "--dry-run", *args],
            env=env(MPIRUN=_stub(tmp_path, OMPI5)), timeout=30)
    assert r.returncode == 2
    assert r.stderr.count("mpirun.sh:") == 1 and message in r.stderr, r.stderr
    assert r.stdout == ""


def test_mpirun_sh_refuses_unknown_launcher(tmp_path):
    r = run([LAUNCH / "mpirun.sh", "--dry-run"],
            env=env(MPIRUN=_stub(tmp_path, "srun 22.05")), timeout=30)
    assert r.returncode == 2 and "neither Open MPI nor hydra" in r.stderr


# ---- the launcher matrix, for real --------------------------------------------------
def _launch(kind, tmp_path):
    """(argv prefix, environment, ranks, launcher name) for one way of starting."""
    if kind == "openmpi5":
        return [LAUNCH / "local.sh", "-n", "2"], env(), 2, "openmpi"
    if kind == "openmpi4":
        try:
            mpirun, lib = ensure_openmpi4()
        except RuntimeError as exc:
            pytest.skip(f"Debian openmpi-bin not installable: {exc}")
        return [LAUNCH / "local.sh", "-n", "2"], env(MPIRUN=mpirun, MPI4PY_LIBMPI=lib), 2, "openmpi"
    if kind == "mpich":
        try:
            mpiexec, lib = ensure_mpich()
        except RuntimeError as exc:
            pytest.skip(str(exc))
        return [LAUNCH / "local.sh", "-n", "2"], env(MPIRUN=mpiexec, MPI4PY_LIBMPI=lib), 2, "hydra"
    if kind == "torchrun":
        return ([VENV / "bin" / "torchrun", "--standalone", "--nproc-per-node=2", "-m", "mpibench"],
                env(), 2, "torchrun")
    return [PY, "-m", "mpibench"], env(), 1, "none"


KINDS = ["openmpi5", "openmpi4", "mpich", "torchrun", "lone"]


@needs_venv
@pytest.mark.parametrize("kind", KINDS)
def test_info(kind, tmp_path):
    prefix, e, n, name = _launch(kind, tmp_path)
    r = run([*prefix, "info"], env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    assert info_rows(r.stdout) == [(i, HOST, i, name) for i in range(n)], r.stdout
    if kind == "openmpi4":
        assert "Open MPI v4." in r.stdout
    if kind == "mpich":
        assert "MPICH" in r.stdout


@needs_venv
@pytest.mark.parametrize("kind", KINDS)
def test_small_run(kind, tmp_path):
    prefix, e, n, name = _launch(kind, tmp_path)
    out = tmp_path / "r.json"
    r = run([*prefix, *TINY_RUN, "--json", out], env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = run_doc(out)
    assert doc["world"]["barrier"] == {"torchrun": "TCPStore counter (add, then wait for the "
                                                   "last rank's key)",
                                       "none": "none (one process)"}.get(name, "MPI_Barrier")
    if n == 1:   # one rank: no per-host probe worth a table; placement and rows only
        assert [(d["rank"], d["hostname"], d["local_rank"]) for d in doc["config"]["devices"]] \
            == [(0, HOST, 0)]
        assert doc["world"]["launcher"] == name and doc["results"]
    else:
        assert_run_ok(doc, [HOST], n, name)


@needs_venv
def test_store_barrier_under_torchrun_holds_every_rank():
    """Without MPI the timing barrier is the store's counter: no rank leaves before the
    last one arrives, in 30 rounds of 3 ranks with one late rank each round; the spread
    of exit times is printed beside that of the sequential gets it replaced (figures
    only: a loaded machine decides them)."""
    r = run([VENV / "bin" / "torchrun", "--standalone", "--nproc-per-node=3",
             LAUNCH.parent / "tests" / "scripts" / "store_barrier.py", "30"],
            env=env(PYTHONPATH=LAUNCH.parent))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("barrier=")]
    print("\n".join(lines))
    assert len(lines) == 2 and lines[1].startswith('barrier="TCPStore counter'), r.stdout
    assert all(line.endswith(" early_exits=0") for line in lines), r.stdout

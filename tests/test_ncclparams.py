"""NCCL's effective parameters (NCCL 2.30's key-based parameter API) read with ctypes from a
real shared library built here with the API's two functions, and from one without them; what
differs across ranks becomes a finding naming ranks and hosts. Building the library starts gcc:
those tests take the `procs` fixture (no mpirun)."""
import json
import shutil
import subprocess

import pytest

from mpibench.diagnose import ncclparams
from mpibench.results import doctortext

# The two calls as NCCL's src/param/c_api.cc defines them: a key table owned by the library,
# each value a string with its length; an unknown key is ncclInvalidArgument (4).
WITH_API = r"""
#include <string.h>
static const char* keys[] = {"NCCL_ALGO", "NCCL_PROTO", "NCCL_IB_HCA", "NCCL_DEBUG_FILE"};
static const char* vals[] = {"Ring", "Simple", "", "/tmp/x.log"};
int ncclGetVersion(int* v) { *v = 23007; return 0; }
int ncclParamGetAllParameterKeys(const char*** table, int* n) { *table = keys; *n = 4; return 0; }
int ncclParamGetParameter(const char* key, const char** value, int* len) {
  for (int i = 0; i < 4; i++)
    if (strcmp(key, keys[i]) == 0) { *value = vals[i]; *len = (int)strlen(vals[i]); return 0; }
  *value = 0; *len = 0; return 4;
}
"""
WITHOUT_API = "int ncclGetVersion(int* v) { *v = 22805; return 0; }\n"


def build(tmp_path, name, source):
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler (gcc) to build a stand-in libnccl")
    (tmp_path / f"{name}.c").write_text(source)
    lib = tmp_path / name / "libnccl.so.2"
    lib.parent.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / f"{name}.c")], check=True)
    return str(lib)


@pytest.mark.usefixtures("procs")
def test_the_reader_returns_every_key_and_its_value(tmp_path):
    got = ncclparams.read(build(tmp_path, "api", WITH_API))
    assert got["why"] is None and got["version"] == "2.30.7"
    assert got["values"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple", "NCCL_IB_HCA": "",
                             "NCCL_DEBUG_FILE": "/tmp/x.log"}


@pytest.mark.usefixtures("procs")
def test_without_the_api_or_a_library_the_reader_says_why(tmp_path):
    path = build(tmp_path, "old", WITHOUT_API)
    got = ncclparams.read(path)
    assert got["values"] is None
    assert got["why"] == f"NCCL 2.28.5 has no parameter API (2.30+) in {path}"
    assert "cannot load" in ncclparams.read(str(tmp_path / "absent.so"))["why"]


def test_the_library_is_the_loaded_one_else_torch_bundled_never_another(tmp_path):
    maps = ("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n"
            "7f20-7f30 r-xp 00000000 08:01 13 /opt/x/libnccl.so.2.30.7\n")
    assert ncclparams.library(maps, [])[0] == "/opt/x/libnccl.so.2.30.7"
    site = tmp_path / "site"
    assert ncclparams.library("", [str(site)]) == (
        None, "no libnccl loaded, and no torch-bundled nvidia/nccl/lib/libnccl.so.2")
    bundled = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    bundled.parent.mkdir(parents=True)
    bundled.write_bytes(b"")
    path, found = ncclparams.library("7f00-7f10 r-xp 0 08:01 12 /usr/lib/libc.so.6\n", [str(site)])
    assert path == str(bundled) and "bundled" in found


WHERE = [("node01", 0), ("node01", 1), ("node02", 0)]


def rank(values, env=None):
    return {"path": "/x/libnccl.so.2", "version": "2.30.7", "found": "loaded by this process",
            "values": values, "why": None, "env": env or {}}


def test_a_value_differing_across_ranks_is_a_finding_naming_ranks_and_hosts():
    same = {"NCCL_PROTO": "Simple", "NCCL_DEBUG_FILE": "/tmp/a"}
    outputs = [ncclparams.MARK + json.dumps(rank(dict(same, NCCL_ALGO="Ring"), {"NCCL_ALGO": "Tree"})),
               "other output\n" + ncclparams.MARK + json.dumps(rank(dict(same, NCCL_ALGO="Ring"))),
               ncclparams.MARK + json.dumps(rank(dict(same, NCCL_ALGO="Tree", NCCL_DEBUG_FILE="/tmp/b")))]
    ranks = ncclparams.collect(outputs)
    differ, ignored = ncclparams.compare(ranks, WHERE)
    assert differ == {"NCCL_ALGO": {"Ring": [0, 1], "Tree": [2]}}     # NCCL_DEBUG_FILE: doctor's own
    assert ignored == [(0, "NCCL_ALGO", "Tree", "Ring")]
    (f,) = ncclparams.findings(differ, WHERE)
    assert f[0] is None and f.severity == "warning"
    assert f[1].startswith("NCCL's effective NCCL_ALGO differs across ranks: 'Ring' on rank 0 "
                           "(node01), rank 1 (node01); 'Tree' on rank 2 (node02)")
    assert ncclparams.compare(ranks[:2], WHERE)[0] == {}        # alike: no finding
    assert ncclparams.findings({}, WHERE) == []


def test_why_values_were_not_read_names_the_ranks_unless_all_share_it():
    old = dict(rank(None), why="NCCL 2.28.5 has no parameter API (2.30+) in /x/libnccl.so.2")
    assert ncclparams.reasons([rank({}), rank({}), rank({})], WHERE) is None
    assert ncclparams.reasons([None, None, None], WHERE) == "the probe did not print them"
    assert ncclparams.reasons([rank({}), old, None], WHERE) == (
        "NCCL 2.28.5 has no parameter API (2.30+) in /x/libnccl.so.2 on rank 1 (node01); "
        "the probe did not print them on rank 2 (node02)")


class Said:
    def __init__(self):
        self.lines = []

    def say(self, *lines):
        self.lines += lines


def test_doctor_prints_counts_differences_and_ignored_settings():
    ranks = [rank({"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}), rank({"NCCL_ALGO": "Tree"}), None]
    differ, ignored = ncclparams.compare(ranks, WHERE)
    out = Said()
    doctortext.effective(out, {"read": True, "why": "the probe did not print them", "ranks": ranks,
                               "differ": differ,
                               "ignored": [{"rank": r, "key": k, "env": e, "effective": v}
                                           for r, k, e, v in ignored]}, WHERE)
    text = "\n".join(out.lines)
    assert "1 parameter read on 2 ranks from /x/libnccl.so.2 (NCCL 2.30.7" in text
    assert "not read on some ranks: the probe did not print them" in text
    assert "DIFFERS NCCL_ALGO: 'Ring' on rank 0 (node01); 'Tree' on rank 1 (node01)" in text
    assert "NCCL_ALGO: the environment says 'Tree', NCCL uses 'Ring' on rank 0 (node01)" in text
    out = Said()
    doctortext.effective(out, {"read": False, "why": "no libnccl loaded: torch without CUDA"}, WHERE)
    assert out.lines[1:] == ["#   not read: no libnccl loaded: torch without CUDA"]


def test_with_a_cpu_torch_doctor_says_no_libnccl_is_loaded():
    import torch
    if torch.version.cuda is not None:
        pytest.skip(f"this torch ({torch.__version__}) is built with CUDA")
    from mpibench.commands import doctor
    params = doctor._effective({"skipped": "no CUDA GPU visible to torch (NCCL needs one)"})
    out = Said()
    doctortext.effective(out, params, [])
    assert out.lines[1:] == ["#   not read: no libnccl loaded: torch without CUDA"]

"""launcher.detect from synthetic environments; SLURM host lists; interface name matching."""
import os

import pytest

from mpibench.errors import UsageError
from mpibench.launch.launcher import detect
from mpibench.launch.netaddr import match_ifname
from mpibench.launch.slurm import expand_nodelist


def where(env):
    p = detect(env)
    return p.launcher, p.rank, p.size, p.local_rank, p.local_size


# --- each launcher, with the variables it really sets (FIELD-NOTES section 3) ---

def test_nothing_is_a_lone_process():
    assert where({}) == ("none", 0, 1, 0, 1)
    assert not detect({}).uses_mpi


def test_openmpi():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
           "OMPI_COMM_WORLD_NODE_RANK": "1", "PMIX_RANK": "3"}
    assert where(env) == ("openmpi", 3, 4, 1, 2)
    assert detect(env).uses_mpi


def test_hydra():
    env = {"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1"}
    assert where(env) == ("hydra", 2, 3, 0, 1)
    assert detect(env).uses_mpi


def test_srun_pmi2_is_not_hydra():
    env = {"PMI_RANK": "3", "PMI_SIZE": "4", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
           "SLURM_STEP_ID": "0", "SLURM_LOCALID": "1"}
    assert where(env) == ("slurm-pmi2", 3, 4, 1, None)
    assert detect(env).uses_mpi


def test_mvapich2():
    env = {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
           "MV2_COMM_WORLD_LOCAL_RANK": "1", "MV2_COMM_WORLD_LOCAL_SIZE": "4"}
    assert where(env) == ("mvapich2", 5, 8, 1, 4)


def test_torchrun():
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
           "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": "none",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert where(env) == ("torchrun", 1, 2, 1, 2)
    assert not detect(env).uses_mpi


def test_plain_env_variables():
    # RANK/WORLD_SIZE exported by a script (no torchrun): local rank left to the bootstrap
    assert where({"RANK": "0", "WORLD_SIZE": "2"}) == ("env", 0, 2, None, None)


def test_srun_pmix():
    # srun --mpi=pmix: PMIX_RANK plus SLURM step variables, no OMPI_*, no size from PMIx
    env = {"PMIX_RANK": "3", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
           "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4",
           "SLURM_JOB_ID": "12"}
    assert where(env) == ("slurm-pmix", 3, 4, 1, None)
    assert detect(env).uses_mpi


def test_plain_srun():
    env = {"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_STEP_ID": "0",
           "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "12"}
    assert where(env) == ("slurm", 2, 4, 0, None)
    assert not detect(env).uses_mpi


def test_plain_srun_size_from_ntasks():
    env = {"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2"}
    assert where(env)[:3] == ("slurm", 1, 2)


# --- conflicts: the launcher that started the process wins over leftovers ---

def test_openmpi_wins_over_stale_slurm_inside_allocation():
    # mpirun in an allocation leaves SLURM_PROCID=0 / SLURM_LOCALID=0 on every rank
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_RANK": "3",
           "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0",
           "SLURM_NTASKS": "4", "SLURM_JOB_ID": "7"}
    assert where(env) == ("openmpi", 3, 4, 1, 2)


def test_openmpi_without_local_rank_ignores_stale_slurm_localid():
    # left to the bootstrap (ranks sharing a host), never taken from SLURM_LOCALID
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0"}
    assert where(env) == ("openmpi", 3, 4, None, None)


def test_openmpi_wins_over_rank_exported_by_hand():
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
           "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    assert where(env)[:3] == ("openmpi", 1, 2)


def test_slurm_step_wins_over_rank_exported_by_hand():
    env = {"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2",
           "RANK": "0", "WORLD_SIZE": "1"}
    assert where(env)[:3] == ("slurm", 1, 2)


# --- partial environments ---

def test_openmpi_rank_without_size_asks_mpi():
    p = detect({"OMPI_COMM_WORLD_RANK": "2"})
    assert (p.launcher, p.rank, p.size, p.local_rank) == ("openmpi", 2, None, None)
    assert p.uses_mpi


def test_pmix_rank_alone():
    p = detect({"PMIX_RANK": "1"})
    assert (p.launcher, p.rank, p.size, p.local_rank) == ("pmix", 1, None, None)
    assert p.uses_mpi


def test_sbatch_script_itself_is_a_lone_process():
    # the batch script: SLURM_PROCID=0 and the whole job's SLURM_NTASKS, but no step
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
           "SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "h[1-2]", "SLURM_NNODES": "2"}
    assert where(env) == ("none", 0, 1, 0, 1)


def test_empty_values_are_absent():
    assert where({"OMPI_COMM_WORLD_RANK": "", "RANK": ""})[0] == "none"


# --- invalid environments: one clear UsageError ---

@pytest.mark.parametrize("env, words", [
    ({"OMPI_COMM_WORLD_RANK": "one", "OMPI_COMM_WORLD_SIZE": "2"}, "OMPI_COMM_WORLD_RANK"),
    ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2x"}, "OMPI_COMM_WORLD_SIZE"),
    ({"PMIX_RANK": "0.5"}, "PMIX_RANK"),
    ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE"),
    ({"SLURM_PROCID": "x", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2"}, "SLURM_PROCID"),
    ({"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "2"}, "negative"),
], ids=["ompi-rank", "ompi-size", "pmix", "world-size", "slurm", "negative"])
def test_non_integer_is_rejected(env, words):
    with pytest.raises(UsageError, match=words):
        detect(env)


@pytest.mark.parametrize("env", [
    {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"},
    {"PMI_RANK": "4", "PMI_SIZE": "4"},
    {"RANK": "3", "WORLD_SIZE": "2"},
    {"SLURM_PROCID": "2", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2"},
    {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
     "OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
], ids=["ompi", "hydra", "env", "slurm", "local"])
def test_rank_not_below_size_is_rejected(env):
    with pytest.raises(UsageError, match="not below"):
        detect(env)


def test_zero_size_is_rejected():
    with pytest.raises(UsageError, match="at least 1"):
        detect({"RANK": "0", "WORLD_SIZE": "0"})


def test_rank_without_world_size_is_rejected():
    with pytest.raises(UsageError, match="WORLD_SIZE"):
        detect({"RANK": "1"})


def test_usage_error_exits_2():
    with pytest.raises(UsageError) as info:
        detect({"RANK": "1"})
    assert info.value.code == 2


# --- slurm.expand_nodelist ---

@pytest.mark.parametrize("text, nodes", [
    ("h1", ["h1"]),
    ("h1,h2", ["h1", "h2"]),
    ("h[1-3]", ["h1", "h2", "h3"]),
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[1,3-4,7]", ["n1", "n3", "n4", "n7"]),
    ("h[1-3],gpu[01-02]x", ["h1", "h2", "h3", "gpu01x", "gpu02x"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("a,b[1-2],c", ["a", "b1", "b2", "c"]),
    (" h[1-2] ", ["h1", "h2"]),
    ("", []),
])
def test_expand_nodelist(text, nodes):
    assert expand_nodelist(text) == nodes


# --- netaddr.match_ifname: NCCL_SOCKET_IFNAME syntax ---

NAMES = ["docker0", "eth0", "eth1", "eth10", "ib0", "lo"]


@pytest.mark.parametrize("spec, chosen", [
    ("eth", ["eth0", "eth1", "eth10"]),            # a prefix
    ("eth1", ["eth1", "eth10"]),                   # still a prefix
    ("=eth1", ["eth1"]),                           # exact
    ("=eth1,ib0", ["eth1", "ib0"]),                # exact list
    ("eth0,ib", ["eth0", "ib0"]),                  # prefix list
    ("^docker,lo", ["eth0", "eth1", "eth10", "ib0"]),   # exclude prefixes
    ("^=eth1", ["docker0", "eth0", "eth10", "ib0", "lo"]),  # exclude exact
    ("^eth", ["docker0", "ib0", "lo"]),
    ("wlan", []),
    (" eth0 ", ["eth0"]),
])
def test_match_ifname(spec, chosen):
    assert match_ifname(spec, NAMES) == chosen


def test_slurm_rendezvous_address_is_returned_not_exported(monkeypatch):
    """Plain srun: the step's first node and a port from the job id, MASTER_ADDR/PORT where
    the user set them; the process environment is left as it was."""
    from mpibench.launch import bootstrap
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    env = {"SLURM_STEP_NODELIST": "n[07-08]", "SLURM_JOB_ID": "12", "SLURM_STEP_ID": "1"}
    assert bootstrap._slurm_master(env) == ("n07", str(20000 + 12 * 16 + 1))
    assert bootstrap._slurm_master({**env, "MASTER_ADDR": "h", "MASTER_PORT": "5"}) == ("h", "5")
    assert "MASTER_ADDR" not in os.environ and "MASTER_PORT" not in os.environ
    assert "MASTER_ADDR" not in env
    with pytest.raises(UsageError, match="SLURM_STEP_NODELIST is empty"):
        bootstrap._slurm_master({"SLURM_JOB_ID": "1"})

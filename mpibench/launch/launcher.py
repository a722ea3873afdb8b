"""Which launcher started this process, and what it says about our place in the job.

Pure logic over an environment mapping, so every launcher can be unit-tested from a
synthetic environment. Fields a launcher does not give are None; the bootstrap fills
them in through the communicator (e.g. local rank from the ranks sharing a host).

Order matters: mpirun inside a SLURM allocation leaves stale SLURM_PROCID=0 on every
rank, and a user may have exported RANK by hand, so MPI launchers are read first.
"""
from dataclasses import dataclass, field
from typing import Mapping, Optional

from ..errors import UsageError

# launcher name -> whether its ranks share one MPI job (mpi4py can gather across them)
MPI_LAUNCHERS = ("openmpi", "hydra", "mvapich2", "pmix", "slurm-pmix", "slurm-pmi2")


@dataclass
class Placement:
    # openmpi, hydra, mvapich2, pmix, slurm-pmix, slurm-pmi2, slurm, torchrun, env, none
    launcher: str
    rank: int
    size: Optional[int]            # None: ask MPI
    local_rank: Optional[int] = None
    local_size: Optional[int] = None
    sources: dict = field(default_factory=dict)   # variable names that gave each field

    @property
    def uses_mpi(self):
        return self.launcher in MPI_LAUNCHERS


def _int(env, name):
    value = env.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"launcher variable {name}={value!r} is not an integer") from None
    if number < 0:
        raise UsageError(f"launcher variable {name}={value} is negative")
    return number


def _first(env, *names):
    for name in names:
        value = _int(env, name)
        if value is not None:
            return value, name
    return None, None


# (launcher, rank var, size vars, local rank vars, local size vars)
_TABLE = (
    ("openmpi", "OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",),
     ("OMPI_COMM_WORLD_LOCAL_RANK",), ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
    ("hydra", "PMI_RANK", ("PMI_SIZE",), ("MPI_LOCALRANKID",), ("MPI_LOCALNRANKS",)),
    ("mvapich2", "MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",),
     ("MV2_COMM_WORLD_LOCAL_RANK",), ("MV2_COMM_WORLD_LOCAL_SIZE",)),
)


def _in_slurm_step(env):
    # The batch script itself has SLURM_PROCID=0 and SLURM_NTASKS of the whole job, but
    # no step: only srun sets the step variables.
    return env.get("SLURM_STEP_ID") is not None or env.get("SLURM_STEPID") is not None


def detect(env: Mapping[str, str]) -> Placement:
    for name, rank_var, size_vars, lrank_vars, lsize_vars in _TABLE:
        rank = _int(env, rank_var)
        if rank is None:
            continue
        size, size_src = _first(env, *size_vars)
        lrank, lrank_src = _first(env, *lrank_vars)
        lsize, lsize_src = _first(env, *lsize_vars)
        if name == "hydra" and _in_slurm_step(env):
            name = "slurm-pmi2"    # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE, no MPI_LOCAL*
            if lrank is None:
                lrank, lrank_src = _first(env, "SLURM_LOCALID")
        return _checked(Placement(name, rank, size, lrank, lsize,
                                  {"rank": rank_var, "size": size_src,
                                   "local_rank": lrank_src, "local_size": lsize_src}))

    pmix = _int(env, "PMIX_RANK")
    if pmix is not None:
        # srun --mpi=pmix: PMIx gives the rank, SLURM the rest (PMIx exports no size).
        if _in_slurm_step(env):
            size, size_src = _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
            lrank = _int(env, "SLURM_LOCALID")
            return _checked(Placement("slurm-pmix", pmix, size, lrank, None,
                                      {"rank": "PMIX_RANK", "size": size_src,
                                       "local_rank": "SLURM_LOCALID" if lrank is not None else None}))
        return _checked(Placement("pmix", pmix, None, None, None, {"rank": "PMIX_RANK"}))

    if _int(env, "SLURM_PROCID") is not None and _in_slurm_step(env):
        size, size_src = _first(env, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
        lrank = _int(env, "SLURM_LOCALID")
        return _checked(Placement("slurm", _int(env, "SLURM_PROCID"), size, lrank, None,
                                  {"rank": "SLURM_PROCID", "size": size_src,
                                   "local_rank": "SLURM_LOCALID" if lrank is not None else None}))

    rank = _int(env, "RANK")
    if rank is not None:
        size = _int(env, "WORLD_SIZE")
        if size is None:
            raise UsageError("RANK is set but WORLD_SIZE is not: set both, or start with a launcher")
        name = "torchrun" if env.get("TORCHELASTIC_RUN_ID") or env.get("GROUP_RANK") else "env"
        return _checked(Placement(name, rank, size, _int(env, "LOCAL_RANK"),
                                  _int(env, "LOCAL_WORLD_SIZE"),
                                  {"rank": "RANK", "size": "WORLD_SIZE",
                                   "local_rank": "LOCAL_RANK" if "LOCAL_RANK" in env else None,
                                   "local_size": "LOCAL_WORLD_SIZE" if "LOCAL_WORLD_SIZE" in env else None}))

    return Placement("none", 0, 1, 0, 1, {})


def _checked(p: Placement) -> Placement:
    if p.size is not None:
        if p.size < 1:
            raise UsageError(f"{p.sources.get('size')}={p.size}: world size must be at least 1")
        if p.rank >= p.size:
            raise UsageError(f"{p.sources['rank']}={p.rank} is not below "
                             f"{p.sources['size']}={p.size}: inconsistent launcher variables")
    if p.local_rank is not None and p.local_size is not None and p.local_rank >= p.local_size:
        raise UsageError(f"{p.sources['local_rank']}={p.local_rank} is not below "
                         f"{p.sources['local_size']}={p.local_size}: inconsistent launcher variables")
    return p

"""Which launcher started this process, and what it says about our place in the job.

Pure logic over an environment mapping. Fields a launcher does not give are None; the
bootstrap fills them in through the side channel. MPI launchers are read first: mpirun
inside a SLURM allocation leaves a stale SLURM_PROCID=0 on every rank, and a user may have
exported RANK by hand.
"""
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from ..errors import UsageError

# the launchers whose ranks share one MPI job (mpi4py can gather across them)
MPI_LAUNCHERS = ("openmpi", "hydra", "mvapich2", "pmix", "slurm-pmix", "slurm-pmi2")


@dataclass
class Placement:
    # openmpi, hydra, mvapich2, pmix, slurm-pmix, slurm-pmi2, slurm, torchrun, env, none
    launcher: str
    rank: int
    size: Optional[int]            # None: ask MPI
    local_rank: Optional[int] = None
    local_size: Optional[int] = None
    sources: Dict[str, Optional[str]] = field(default_factory=dict)   # the variables that gave each field

    @property
    def uses_mpi(self) -> bool:
        return self.launcher in MPI_LAUNCHERS


def _int(env: Mapping[str, str], name: str) -> Optional[int]:
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


def _first(env: Mapping[str, str], *names: str) -> Tuple[Optional[int], Optional[str]]:
    for name in names:
        value = _int(env, name)
        if value is not None:
            return value, name
    return None, None


SLURM_SIZE = ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
# (launcher, rank variable, size, local rank and local size variables, each the first set),
# read in this order; slurm counts only inside a step, and RANK needs WORLD_SIZE.
_TABLE = (
    ("openmpi", "OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",),
     ("OMPI_COMM_WORLD_LOCAL_RANK",), ("OMPI_COMM_WORLD_LOCAL_SIZE",)),
    ("hydra", "PMI_RANK", ("PMI_SIZE",), ("MPI_LOCALRANKID",), ("MPI_LOCALNRANKS",)),
    ("mvapich2", "MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",),
     ("MV2_COMM_WORLD_LOCAL_RANK",), ("MV2_COMM_WORLD_LOCAL_SIZE",)),
    ("pmix", "PMIX_RANK", (), (), ()),
    ("slurm", "SLURM_PROCID", SLURM_SIZE, ("SLURM_LOCALID",), ()),
    ("env", "RANK", ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",)),
)
# What stands instead inside a SLURM step: srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE and no
# MPI_LOCAL*; srun --mpi=pmix: PMIx gives the rank, SLURM the rest (PMIx exports no size).
_IN_STEP = {
    "hydra": ("slurm-pmi2", "PMI_RANK", ("PMI_SIZE",), ("MPI_LOCALRANKID", "SLURM_LOCALID"),
              ("MPI_LOCALNRANKS",)),
    "pmix": ("slurm-pmix", "PMIX_RANK", SLURM_SIZE, ("SLURM_LOCALID",), ()),
}


def detect(env: Mapping[str, str]) -> Placement:
    # The batch script itself has SLURM_PROCID=0 and SLURM_NTASKS of the whole job, but no
    # step: only srun sets the step variables.
    step = env.get("SLURM_STEP_ID") is not None or env.get("SLURM_STEPID") is not None
    for entry in _TABLE:
        name, rank_var, *others = _IN_STEP.get(entry[0], entry) if step else entry
        rank = _int(env, rank_var)
        if rank is None or (name == "slurm" and not step):
            continue
        (size, size_src), (lrank, lrank_src), (lsize, lsize_src) = (_first(env, *v) for v in others)
        if name == "env":
            if size is None:
                raise UsageError("RANK is set but WORLD_SIZE is not: set both, or start with a launcher")
            name = "torchrun" if env.get("TORCHELASTIC_RUN_ID") or env.get("GROUP_RANK") else "env"
        if size is not None and size < 1:
            raise UsageError(f"{size_src}={size}: world size must be at least 1")
        sources = {"rank": rank_var, "size": size_src, "local_rank": lrank_src, "local_size": lsize_src}
        place = Placement(name, rank, size, lrank, lsize, sources)
        for low, high in (("rank", "size"), ("local_rank", "local_size")):
            below, top = getattr(place, low), getattr(place, high)
            if below is not None and top is not None and below >= top:
                raise UsageError(f"{place.sources[low]}={below} is not below "
                                 f"{place.sources[high]}={top}: inconsistent launcher variables")
        return place
    return Placement("none", 0, 1, 0, 1, {})

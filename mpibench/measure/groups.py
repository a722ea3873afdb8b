"""Process groups of parts of the job, made with one group-creating collective however many
parts there are.

torch's new_group, called by every rank for every part, costs one collective per part over the
whole job: with a device bound (eager NCCL) every rank, member or not, takes part in an
ncclCommSplit for each group (distributed_c10d._new_process_group_helper, perform_nocolor_split),
and on other backends every rank joins each group's store barrier. So where the backend can
split (NCCL, a bound device) every part comes from one dist.split_group; elsewhere (gloo) each
rank creates its own part's group alone, with use_local_synchronization: its members meet in
one store barrier, and no rank waits for another part's.
"""
from typing import Any, Dict, List, Optional


def can_split(dist: Any, device: Any) -> bool:
    """Whether the default group splits in one collective (dist.split_group): a device bound
    at init and a backend that supports splitting (NCCL)."""
    default = dist.distributed_c10d._get_default_group()
    if (device is None or getattr(default, "bound_device_id", None) is None
            or not hasattr(dist, "split_group")):
        return False
    try:
        return bool(default._get_backend(device).supports_splitting)
    except (AttributeError, RuntimeError):
        return False


def part_group(dist: Any, device: Any, parts: Dict[str, List[int]], rank: int) -> Optional[Any]:
    """The group of the part (of parts: {name: its ranks}, disjoint) that holds rank; None
    when rank is in none. Every rank calls it with the same parts."""
    splits = [sorted(m) for m in parts.values()]
    if can_split(dist, device):
        return dist.split_group(split_ranks=splits, group_desc="mpibench parts")
    mine = next((m for m in splits if rank in m), None)
    return None if mine is None else dist.new_group(mine, use_local_synchronization=True)

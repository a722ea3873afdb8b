"""One module per collective (as nccl-tests keeps one file each); this is their registry."""
from typing import Dict

from . import (all_gather, all_reduce, all_to_all, alltoallv, broadcast, gather, reduce,
               reduce_scatter, scatter, sendrecv)
from .base import Collective

REGISTRY: Dict[str, Collective] = {m.COLLECTIVE.name: m.COLLECTIVE for m in (
    all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, sendrecv, gather, scatter,
    alltoallv)}
NAMES = tuple(REGISTRY)

"""Backends the engine drives: torch.distributed (nccl, gloo) here; each gives buffers,
bound calls, and timing loops with nothing but the collectives inside."""

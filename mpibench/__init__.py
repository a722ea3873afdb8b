"""mpibench: what bandwidth torch.distributed really gets between GPUs and hosts, and why."""
__version__ = "0.1.0"

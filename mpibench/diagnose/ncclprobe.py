"""A short NCCL all_reduce in a fresh process for doctor's transport check: NCCL reads
NCCL_DEBUG and NCCL_DEBUG_FILE once per process, so each rank of doctor starts one with
them set, as MPIBENCH_PROBE="addr port rank size device" python -m mpibench.diagnose.ncclprobe
(device: bootstrap.gpu_index's for the rank); its log says which transports were used, and
it prints NCCL's effective parameters (ncclparams.MARK) once NCCL has started.
"""
import datetime
import os
import sys

from ..launch import verdict


def main() -> int:
    addr, port, rank_text, size_text, device_text = os.environ["MPIBENCH_PROBE"].split()
    rank, size, device = int(rank_text), int(size_text), int(device_text)
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=float(os.environ.get("MPIBENCH_PROBE_TIMEOUT", "120")))
    store = dist.TCPStore(addr, int(port), size, False, timeout=timeout)
    dist.init_process_group("nccl", store=dist.PrefixStore("ncclprobe", store), rank=rank,
                            world_size=size, timeout=timeout,
                            device_id=torch.device("cuda", device))
    # A large and a small all_reduce: rings and trees (and NVLS/CollNet when chosen)
    # connect on first use.
    for n in (16 << 20, 1024):
        x = torch.ones(n, device="cuda")
        dist.all_reduce(x)
    torch.cuda.synchronize()
    ok = int(x[0].item()) == size
    from .ncclparams import report
    verdict.out(report())     # NCCL's effective parameters, now that it has started
    dist.destroy_process_group()
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())

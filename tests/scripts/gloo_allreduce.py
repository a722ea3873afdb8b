"""torch gloo all_reduce across mpirun ranks; rank 0 prints time and busbw.

Usage: python gloo_allreduce.py [MiB] [iters].  Rank/size come from Open MPI's
variables; MASTER_ADDR/MASTER_PORT must be set by the caller.
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
mib = float(sys.argv[1]) if len(sys.argv) > 1 else 1
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 3
dist.init_process_group("gloo", rank=rank, world_size=size)
x = torch.ones(int(mib * 2**20) // 4, dtype=torch.float32)
dist.all_reduce(x)  # warm-up, also the correctness check
ok = bool(torch.all(x == size))
times = []
for _ in range(iters):
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(x)
    times.append(time.perf_counter() - t0)
t = min(times)
algbw = x.numel() * 4 / t / 1e9
busbw = algbw * 2 * (size - 1) / size
print(f"rank={rank} host={socket.gethostname()} ok={ok} bytes={x.numel() * 4} "
      f"time_s={t:.4f} algbw_GBps={algbw:.4f} busbw_GBps={busbw:.4f} "
      f"busbw_Gbps={busbw * 8:.3f}", flush=True)
dist.destroy_process_group()

"""Print one line per rank: rank, size, hostname, local rank (needs mpi4py)."""
import os
import socket

from mpi4py import MPI

comm = MPI.COMM_WORLD
print(f"rank={comm.Get_rank()} size={comm.Get_size()} host={socket.gethostname()} "
      f"local={os.environ.get('OMPI_COMM_WORLD_LOCAL_RANK')}", flush=True)

#!/bin/sh
# Batch job: start ranks with the mpirun given as $1 (rest: its extra args)
# and print rank, hostname and local rank of each.
#SBATCH --nodes=2 --ntasks-per-node=2
MPIRUN=$1; shift
exec "$MPIRUN" --allow-run-as-root "$@" python3 -c 'import os, socket; e = os.environ; print("rank=%s host=%s local=%s" % (e.get("OMPI_COMM_WORLD_RANK"), socket.gethostname(), e.get("OMPI_COMM_WORLD_LOCAL_RANK")), flush=True)'

"""Stage 1, launch: from the launcher's variables to a running job.

launcher maps mpirun/srun/torchrun variables to rank, size and device; bootstrap connects
the ranks, finds the rendezvous and starts the process group; session holds what every
command runs in; comm is the MPI side channel (mpi4py, or
the torch store); netaddr and slurm find addresses and host lists; rails binds each local
rank to its interface (MPIBENCH_RAILS); watchdog names hung or dead ranks; faults holds
the test-only fault switches.

May import: mpibench.errors and the package's __version__ only.
"""

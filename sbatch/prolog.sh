#!/usr/bin/env bash
# SLURM Prolog (or Epilog): the node's health check before (after) each job, shorter than
# HealthCheckProgram's. A failing prolog drains the node and requeues the job; the check
# drains it first, with a reason that says why ("mpibench: ...").
#
# slurm.conf:
#   Prolog=/opt/mpibench/sbatch/prolog.sh
#   PrologFlags=Alloc          # on every node of the allocation as soon as it is granted
#
# Settings as in sbatch/healthcheck.sh; MPIBENCH_PROLOG_ARGS (default "-b 256M -n 3 -w 1")
# comes after MPIBENCH_HEALTH_ARGS, so its size and counts win.
MPIBENCH_PROLOG=1 exec "$(dirname "${BASH_SOURCE[0]}")/healthcheck.sh" "$@"

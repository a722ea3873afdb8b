#!/usr/bin/env bash
# SLURM HealthCheckProgram: mpibench check --health on this node alone (one rank per GPU,
# else 2), NHC's one line ("node | Healthy" / "node | ERROR: mpibench: reason"), exit 0 or 1;
# an unhealthy node, or one whose test hung (exit 124), is drained with a reason that
# starts with "mpibench:".
#
# slurm.conf (the check uses the GPUs: run it on idle nodes only):
#   HealthCheckProgram=/opt/mpibench/sbatch/healthcheck.sh
#   HealthCheckInterval=3600
#   HealthCheckNodeState=IDLE
#
# slurmd starts it as root with an almost empty environment, so settings come from a file:
#   MPIBENCH_HEALTH_CONFIG  sourced first when it exists (default /etc/mpibench/health.env)
#   MPIBENCH_PYTHON         the python that has mpibench (default: this checkout's .venv)
#   MPIBENCH_HEALTH_RANKS   ranks (default: the GPUs nvidia-smi lists, else 2)
#   MPIBENCH_HEALTH_ARGS    more arguments for check, e.g. "--expect /etc/mpibench/expect.json
#                           --metrics /var/lib/prometheus/node-exporter/mpibench-health.prom"
#   MPIBENCH_PROLOG_ARGS    what sbatch/prolog.sh adds (default "-b 256M -n 3 -w 1")
# Arguments given to this script go to check too (--report-only: drain nothing).
# sbatch/prolog.sh runs the same before each job.
set -uo pipefail
export PATH=${PATH:+$PATH:}/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config=${MPIBENCH_HEALTH_CONFIG:-/etc/mpibench/health.env}
if [[ -r $config ]]; then source "$config"; fi
# This node alone: a prolog runs inside the job's allocation, which Open MPI would use.
for v in $(compgen -e | grep '^SLURM_'); do
  [[ $v == SLURM_CONF ]] || unset "$v"
done
read -r -a extra <<<"${MPIBENCH_HEALTH_ARGS:-}"
if [[ ${MPIBENCH_PROLOG:-0} == 1 ]]; then      # sbatch/prolog.sh: a shorter test
  read -r -a more <<<"${MPIBENCH_PROLOG_ARGS:--b 256M -n 3 -w 1}"
  extra+=("${more[@]}")
fi
rc=0
"$here/../launch/local.sh" ${MPIBENCH_HEALTH_RANKS:+-n "$MPIBENCH_HEALTH_RANKS"} \
  check --health "${extra[@]}" "$@" || rc=$?
# A hang (124) is the node's fault too (a GPU or NVLink that stopped answering), but no
# rank is left to say so; slurmd does not act on this script's exit code.
if ((rc == 124)); then
  node=${SLURMD_NODENAME:-$(hostname -s)}
  echo "$node | ERROR: mpibench: the test inside the host hung"
  if [[ " ${extra[*]} $* " != *" --report-only "* ]]; then
    timeout 15 scontrol update nodename="$node" state=drain reason="mpibench: the test inside the host hung"
  fi
fi
exit "$rc"

#!/usr/bin/env bash
# Run mpibench on this machine alone: N ranks under mpirun (default: one per GPU, else 2).
#
#   launch/local.sh [-n N] [mpibench args]       e.g. launch/local.sh -n 4 run -e 64M
#
# The same variables as launch/mpirun.sh (MPIBENCH_PYTHON, MPIRUN); ranks may outnumber cores.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

gpus() {
  if [[ -n ${CUDA_VISIBLE_DEVICES+x} ]]; then
    # "0,1,3" -> 3; an empty value hides every GPU.
    local ids
    IFS=, read -r -a ids <<<"$CUDA_VISIBLE_DEVICES"
    echo "${#ids[@]}"
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true
  else
    echo 0
  fi
}

np=""
if [[ ${1:-} == -n || ${1:-} == --np ]]; then
  [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "local.sh: $1 needs a whole number >= 1" >&2; exit 2; }
  np=$2
  shift 2
fi
if [[ -z $np ]]; then
  np=$(gpus)
  ((np > 0)) || np=2
fi
exec "$here/mpirun.sh" --np "$np" --oversubscribe -- "$@"

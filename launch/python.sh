# Sourced by launch/mpirun.sh and sbatch/common.sh: which python starts mpibench.
#
# pick_python HOME sets PICKED_PYTHON: MPIBENCH_PYTHON when set, else HOME/.venv's python
# (make venv), else python3. On a host with NVIDIA GPUs (/dev/nvidia0..., or GPUs listed
# by nvidia-smi -L) a default whose torch has no CUDA, such as the CPU wheel `make demo`
# installs, is refused: it would benchmark the CPUs. Returns 1 with PICK_ERROR then.
# A python given in MPIBENCH_PYTHON is the user's choice and is taken as it is (mpibench
# itself warns when torch there has no CUDA).

has_nvidia_gpus() {
  compgen -G '/dev/nvidia[0-9]*' >/dev/null && return 0
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  local listed   # read whole: a pipe into grep -q could end nvidia-smi by SIGPIPE
  listed=$(nvidia-smi -L 2>/dev/null) || return 1
  [[ $'\n'$listed == *$'\n'"GPU "* ]]
}

pick_python() {
  PICK_ERROR=""
  if [[ -n ${MPIBENCH_PYTHON:-} ]]; then PICKED_PYTHON=$MPIBENCH_PYTHON; return 0; fi
  PICKED_PYTHON=python3
  if [[ -x $1/.venv/bin/python ]]; then PICKED_PYTHON=$1/.venv/bin/python; fi
  has_nvidia_gpus || return 0
  local torch
  torch=$("$PICKED_PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda or "")' \
          2>/dev/null) || torch="none"
  if [[ $torch == *" "?* ]]; then return 0; fi     # "2.13.0 12.8": a CUDA build
  if [[ $torch == none ]]; then torch="no torch"; else torch="torch ${torch% } without CUDA"; fi
  PICK_ERROR="this host has NVIDIA GPUs but the default python $PICKED_PYTHON has $torch: \
it would benchmark the CPUs; set MPIBENCH_PYTHON to a python whose torch has CUDA \
(or to $PICKED_PYTHON to measure the CPUs anyway)"
  return 1
}

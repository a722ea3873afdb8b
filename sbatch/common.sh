# Shared by the sbatch scripts here (sourced, not submitted): where mpibench is, how many
# ranks per node, where results go, and running the command with its output kept.
#
# Variables (all optional):
#   MPIBENCH_HOME     this repository (default: the folder sbatch was called from)
#   MPIBENCH_PYTHON   python that has mpibench, the same path on every node (default:
#                     MPIBENCH_HOME/.venv's, refused on a GPU node when its torch has no
#                     CUDA, else python3)
#   MPIBENCH_PPN      ranks per node (default: GPUs per node, else the allocation's tasks per node)
#   MPIBENCH_RESULTS  parent folder of the results (default: results/ in the submit folder)

die() { printf 'mpibench job: %s\n' "$*" >&2; exit 2; }
[[ -n ${SLURM_JOB_ID:-} ]] || die "submit this script with sbatch"
[[ -f $MPIBENCH_HOME/launch/mpirun.sh ]] || die "no launch/mpirun.sh in MPIBENCH_HOME=$MPIBENCH_HOME"

# As launch/mpirun.sh: the checkout's .venv first, unless its torch has no CUDA on a GPU node.
source "$MPIBENCH_HOME/launch/python.sh"
pick_python "$MPIBENCH_HOME" || die "$PICK_ERROR"
export MPIBENCH_PYTHON=$PICKED_PYTHON

# "4(x2)" or "4,2" -> 4;  "a100:8" -> 8
first_count() { local v=${1%%[(,]*}; v=${v##*:}; [[ $v =~ ^[1-9][0-9]*$ ]] && echo "$v"; }
tasks_per_node=$(first_count "${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-1}}") || tasks_per_node=1
gpus_per_node=$(first_count "${SLURM_GPUS_ON_NODE:-${SLURM_GPUS_PER_NODE:-0}}") || gpus_per_node=0
if [[ -n ${MPIBENCH_PPN:-} ]]; then PPN=$MPIBENCH_PPN
elif ((gpus_per_node > 0)); then PPN=$gpus_per_node
else PPN=$tasks_per_node
fi
[[ $PPN =~ ^[1-9][0-9]*$ ]] || die "MPIBENCH_PPN=$PPN is not a whole number >= 1"
NODES=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
NP=$((PPN * NODES))
# More ranks than SLURM tasks (e.g. --gpus-per-node=8 with the default 1 task): the GPUs
# are what counts, so let the launcher start more ranks than the allocation's task slots.
OVER=0
if ((PPN > tasks_per_node)); then OVER=1; fi

OUTDIR=${MPIBENCH_RESULTS:-${SLURM_SUBMIT_DIR:-$PWD}/results}/$SLURM_JOB_ID
mkdir -p "$OUTDIR"

# mpibench's arguments: the script's, default "run"; run writes its JSON beside the text.
mpibench_args() {
  ARGS=("$@")
  ((${#ARGS[@]})) || ARGS=(run)
  if [[ ${ARGS[0]} == run || ${ARGS[0]} == -* ]]; then
    ARGS+=(--json "$OUTDIR/results.json")
  fi
}

# Run LAUNCH... mpibench-args, keeping a record of the job and all output in $OUTDIR.
run_job() {
  {
    echo "job $SLURM_JOB_ID on $NODES nodes (${SLURM_JOB_NODELIST:-?}), $PPN ranks per node"
    printf 'command:'; printf ' %q' "$@"; echo
    echo "start $(date -Is)"
  } >"$OUTDIR/job.txt"
  echo "mpibench job: results in $OUTDIR"
  local rc=0
  # launch/quiet.awk: the launcher's own report of an ending mpibench chose becomes one line.
  "$@" 2>&1 | awk -f "$MPIBENCH_HOME/launch/quiet.awk" | tee "$OUTDIR/output.txt" || rc=$?
  echo "end $(date -Is) exit $rc" >>"$OUTDIR/job.txt"
  return "$rc"
}

# The two ways to start the ranks.  mpirun: Open MPI reads the allocation itself.
run_mpirun() {
  mpibench_args "$@"
  local launch=("$MPIBENCH_HOME/launch/mpirun.sh" --np "$NP" --ppn "$PPN")
  if ((OVER)); then launch+=(--oversubscribe); fi
  run_job "${launch[@]}" -- "${ARGS[@]}"
}

# srun: SLURM starts every rank; MPIBENCH_SRUN_MPI picks the PMI plugin (default pmix;
# "none" starts plain tasks, which rendezvous through SLURM's variables instead of MPI).
# No --gpus-per-task: local rank i uses GPU i of those the node shows every rank.
run_srun() {
  mpibench_args "$@"
  local python
  python=$(command -v "$MPIBENCH_PYTHON") || die "no $MPIBENCH_PYTHON on PATH; set MPIBENCH_PYTHON"
  local launch=(srun "--mpi=${MPIBENCH_SRUN_MPI:-pmix}" --nodes="$NODES" --ntasks="$NP"
                --ntasks-per-node="$PPN" --kill-on-bad-exit=1)
  if ((OVER)); then launch+=(--overcommit); fi
  run_job "${launch[@]}" "$python" -m mpibench "${ARGS[@]}"
}

#!/usr/bin/env bash
# Start mpibench across hosts with mpirun (Open MPI 4 or 5, or MPICH/Intel MPI hydra).
#
#   launch/mpirun.sh --host n1:8,n2:8 [mpibench args]          # 8 ranks on each host
#   launch/mpirun.sh --hostfile hosts --ppn 8 run -e 1G         # a hostfile, 8 ranks per host
#   launch/mpirun.sh --ppn 4 run                                # inside a SLURM allocation
#   launch/mpirun.sh --np 2 --oversubscribe info                # this machine only
#
# Options (everything after them, or after --, goes to mpibench):
#   --host LIST       n1:8,n2:8 (ranks per host after the colon) or n1,n2 with --ppn
#   --hostfile FILE   one host per line ("n1 slots=8" or "n1:8" or "n1" with --ppn)
#   --ppn N           ranks per host (default: the slots given, or the allocation's)
#   --np N            total ranks (default: ppn x hosts, or all slots)
#   --iface IF        network interface for NCCL, gloo and MPI's own TCP traffic
#   --bind WHAT       none (default), numa, socket or core
#   --oversubscribe   allow more ranks than cores (CPU trials)
#   --mca NAME VALUE  passed to mpirun as --mca NAME VALUE (Open MPI); repeatable
#   --mpi-arg ARG     one more argument for mpirun, verbatim; repeatable
#   --program PROG    run PROG (an MPI program, e.g. a peer benchmark) instead of mpibench;
#                     the arguments after the options go to it
#   --dry-run         print the command instead of running it
# Variables:
#   MPIBENCH_PYTHON   python that has mpibench, the same path on every host (default: this
#                     checkout's .venv, refused on a GPU host when its torch has no CUDA,
#                     else python3); its venv's mpirun is used if it has one
#   MPIRUN            the mpirun to use (default: next to MPIBENCH_PYTHON, else on PATH)
#   MPIBENCH_FORWARD  more variable names to pass to every rank, space-separated
# Every rank gets the exported NCCL_*, GLOO_*, UCX_*, TORCH_NCCL_*, MPIBENCH_*, MPI4PY_*
# variables, MASTER_ADDR, MASTER_PORT, LD_LIBRARY_PATH, PYTHONPATH and
# TORCH_DISTRIBUTED_DEBUG (-x): remote hosts do not inherit this shell's environment.
# CUDA_VISIBLE_DEVICES is not forwarded: each host has its own (SLURM sets it per node);
# ranks on this host still see this shell's.
set -euo pipefail

die() { printf 'mpirun.sh: %s\n' "$*" >&2; exit 2; }
is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }

hosts="" hostfile="" ppn="" np="" iface="" bind="none" oversub=0 dry=0 program=""
mpi_args=()
while (($#)); do
  case $1 in
    --host|--hosts) (($# >= 2)) || die "$1 needs a value"; hosts=$2; shift 2 ;;
    --hostfile) (($# >= 2)) || die "$1 needs a value"; hostfile=$2; shift 2 ;;
    --ppn) (($# >= 2)) && is_count "$2" || die "--ppn needs a whole number >= 1"; ppn=$2; shift 2 ;;
    --np) (($# >= 2)) && is_count "$2" || die "--np needs a whole number >= 1"; np=$2; shift 2 ;;
    --iface) (($# >= 2)) || die "--iface needs an interface name"; iface=$2; shift 2 ;;
    --bind) (($# >= 2)) || die "--bind needs a value"; bind=$2; shift 2
            [[ $bind =~ ^(none|numa|socket|core)$ ]] || die "--bind: none, numa, socket or core" ;;
    --oversubscribe) oversub=1; shift ;;
    --mca) (($# >= 3)) || die "--mca needs NAME VALUE"; mpi_args+=(--mca "$2" "$3"); shift 3 ;;
    --mpi-arg) (($# >= 2)) || die "--mpi-arg needs a value"; mpi_args+=("$2"); shift 2 ;;
    --program) (($# >= 2)) || die "--program needs a path"; program=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) break ;;   # the first argument we do not know starts mpibench's
  esac
done
[[ -n $hosts && -n $hostfile ]] && die "give --host or --hostfile, not both"

# The python: MPIBENCH_PYTHON, else this checkout's .venv (make venv) unless its torch
# has no CUDA on a GPU host, else python3 (launch/python.sh).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/python.sh"
pick_python "$(cd "$here/.." && pwd)" || [[ -n $program ]] || die "$PICK_ERROR"
python=$PICKED_PYTHON
if [[ $python != */* ]]; then
  python=$(command -v "$python") || die "no $python on PATH; set MPIBENCH_PYTHON"
fi
if [[ -z ${MPIRUN:-} ]]; then
  # The launcher must come from the MPI install that mpi4py loads: prefer the venv's.
  if [[ -x ${python%/*}/mpirun ]]; then MPIRUN=${python%/*}/mpirun
  else MPIRUN=$(command -v mpirun) || die "no mpirun on PATH or next to $python; set MPIRUN"
  fi
elif [[ $MPIRUN != */* ]]; then
  MPIRUN=$(command -v "$MPIRUN") || die "MPIRUN=$MPIRUN is not on PATH"
fi
# Absolute paths: remote hosts start from them (Open MPI also finds its own install
# there, like --prefix). Only the folder is made absolute: a venv's python is a link.
absolute() { local dir; dir=$(cd "${1%/*}" && pwd) || die "no folder ${1%/*}"; echo "$dir/${1##*/}"; }
python=$(absolute "$python")
MPIRUN=$(absolute "$MPIRUN")
[[ -x $python ]] || die "$python is not an executable"
if ((!dry)) && [[ -z $program ]] && ! "$python" -c 'import mpibench' 2>/dev/null; then
  die "$python cannot import mpibench: set MPIBENCH_PYTHON to the python that has it"
fi

# Which launcher: the option names differ between Open MPI 4 (orte), 5 (prte) and hydra.
version=$("$MPIRUN" --version 2>&1 | head -n 5) || true
if [[ $version =~ (Open\ MPI|OpenRTE)\)\ ([0-9]+)\. ]]; then
  flavor=openmpi${BASH_REMATCH[2]}
elif [[ $version == *HYDRA* ]]; then
  flavor=hydra
else
  die "$MPIRUN is neither Open MPI nor hydra (it says: ${version%%$'\n'*})"
fi

# Hosts: "n1:8,n2" -> names and slots; a hostfile the same way.
names=() slots=()
add_host() {  # NAME [SLOTS]
  [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || die "bad host name '$1'"
  [[ -z ${2:-} ]] || is_count "$2" || die "bad slot count '$2' for host $1"
  names+=("$1"); slots+=("${2:-}")
}
if [[ -n $hosts ]]; then
  IFS=, read -r -a items <<<"$hosts"
  for item in "${items[@]}"; do
    if [[ $item == *:* ]]; then add_host "${item%%:*}" "${item#*:}"
    elif [[ -n $item ]]; then add_host "$item"
    fi
  done
elif [[ -n $hostfile ]]; then
  [[ -r $hostfile ]] || die "cannot read hostfile $hostfile"
  while read -r name rest || [[ -n $name ]]; do
    [[ -z $name || $name == \#* ]] && continue
    n=""
    [[ $name == *:* ]] && { n=${name#*:}; name=${name%%:*}; }
    [[ $rest =~ slots=([0-9]+) ]] && n=${BASH_REMATCH[1]}
    add_host "$name" "$n"
  done <"$hostfile"
  ((${#names[@]})) || die "hostfile $hostfile names no host"
fi

# Ranks per host: --ppn, else every host's slots when they are all equal.
if [[ -z $ppn && ${#names[@]} -gt 0 ]]; then
  same=${slots[0]}
  for s in "${slots[@]}"; do [[ $s == "$same" ]] || same=""; done
  ppn=$same
fi
if [[ -z $ppn && ${#names[@]} -eq 0 && -n ${SLURM_JOB_ID:-} && -z $np ]]; then
  # Inside an allocation: its tasks per node ("2(x3)" -> 2), else one per GPU.
  ppn=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-}}
  ppn=${ppn%%[(,]*}
  is_count "${ppn:-x}" || ppn=""
fi
if [[ -n $ppn && -z $np && ${#names[@]} -gt 0 ]]; then
  np=$((ppn * ${#names[@]}))
fi

# Variables every rank needs, whatever host it is on.
forward=()
while IFS= read -r var; do
  case $var in
    NCCL_*|GLOO_*|UCX_*|TORCH_NCCL_*|MPIBENCH_*|MPI4PY_*|MASTER_ADDR|MASTER_PORT|\
    LD_LIBRARY_PATH|PYTHONPATH|TORCH_DISTRIBUTED_DEBUG) forward+=("$var") ;;
  esac
done < <(compgen -e)
for var in ${MPIBENCH_FORWARD:-}; do
  [[ $var =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "MPIBENCH_FORWARD: bad variable name '$var'"
  forward+=("$var")
done

cmd=("$MPIRUN")
if [[ $flavor == hydra ]]; then
  # hydra passes the whole environment to every rank by default: all but
  # CUDA_VISIBLE_DEVICES then (ranks on this host inherit it from mpiexec still).
  if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
    cmd+=(-genvlist "$(compgen -e | grep -vx CUDA_VISIBLE_DEVICES | paste -sd, -)")
  fi
  if [[ -n $np ]]; then cmd+=(-n "$np"); fi
  if [[ -n $ppn ]]; then cmd+=(-ppn "$ppn"); fi
  if ((${#names[@]})); then
    spec=""
    for i in "${!names[@]}"; do spec+="${spec:+,}${names[i]}${slots[i]:+:${slots[i]}}"; done
    cmd+=(-hosts "$spec")
  fi
  if [[ -n $iface ]]; then cmd+=(-iface "$iface"); fi
  if [[ $bind != none ]]; then cmd+=(-bind-to "$bind"); fi
else
  if [[ -n $np ]]; then cmd+=(--np "$np"); fi
  if ((${#names[@]})); then
    spec=""
    for i in "${!names[@]}"; do spec+="${spec:+,}${names[i]}:${ppn:-${slots[i]:-1}}"; done
    cmd+=(--host "$spec")
  fi
  # ppr fills each host with exactly ppn ranks, in rank order (ranks 0..ppn-1 on the first
  # host). Plain --oversubscribe with --host makes Open MPI 5 map by core and pile every
  # rank onto the first host: the OVERSUBSCRIBE modifier does not.
  map=${ppn:+ppr:$ppn:node}
  map=${map:-slot}
  if ((oversub)); then map+=:OVERSUBSCRIBE; fi
  # GPU ranks spend their time in NCCL kernels and its helper threads; Open MPI's default
  # core binding squeezes those threads onto one core, so bind to nothing unless asked.
  cmd+=(--map-by "$map" --bind-to "$bind")
  if ((EUID == 0)); then cmd+=(--allow-run-as-root); fi
  if [[ -n $iface ]]; then
    cmd+=(--mca btl_tcp_if_include "$iface")
    # mpirun's own daemons talk over "oob": orte's parameter in 4, prte's in 5.
    if [[ $flavor == openmpi4 ]]; then cmd+=(--mca oob_tcp_if_include "$iface")
    else cmd+=(--prtemca oob_tcp_if_include "$iface")
    fi
  fi
  for var in "${forward[@]}"; do cmd+=(-x "$var"); done
fi
if [[ -n $iface ]]; then
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-$iface} GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-$iface}
  if [[ $flavor != hydra ]]; then
    for var in NCCL_SOCKET_IFNAME GLOO_SOCKET_IFNAME; do
      [[ " ${forward[*]} " == *" $var "* ]] || cmd+=(-x "$var")
    done
  fi
fi
if [[ -n $program ]]; then
  cmd+=("${mpi_args[@]}" "$program" "$@")
else
  cmd+=("${mpi_args[@]}" "$python" -m mpibench "$@")
fi

if ((dry)); then
  printf '%q ' "${cmd[@]}"; printf '\n'
  exit 0
fi
# mpirun (Open MPI 4 and 5) aborts the whole job, exit 1, when its stdout or stderr is a
# pipe whose reader has gone ("SIGPIPE detected - aborting": `mpirun.sh run | head`). A
# pipe gets a relay that passes everything on and, once its reader has gone, keeps
# reading: the job runs to its end and mpirun's exit code stays the job's. The relay
# ignores Ctrl-C, so that mpirun can still write the lines that end an interrupted job.
relay() { trap '' INT TERM; cat 2>/dev/null || true; exec cat >/dev/null; }
# stderr goes through quiet.awk: the launcher's own banners for a job that mpibench ended
# (MPI_Abort's, prterun's, ranks being stopped) become one line, and its NUL bytes go.
quiet() { trap '' INT TERM; awk -f "$here/quiet.awk"; }
if [[ -p /dev/stdout ]]; then exec > >(relay); fi
if [[ -p /dev/stderr ]]; then exec 2> >(quiet | relay >&2); else exec 2> >(quiet >&2); fi
exec "${cmd[@]}"

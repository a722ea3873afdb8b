#!/usr/bin/env bash
# Run a peer benchmark, then `mpibench verify --against` its output, with the same launcher,
# hosts, ranks, sizes and iterations, one after the other; then the per-size ratio table
# (mpibench / peer) through `mpibench compare`.
#
#   launch/verify.sh --host n1,n2 --ppn 1                    # NetPIPE between two hosts
#   launch/verify.sh --host n1:8,n2:8 --nccl-tests ~/nccl-tests/build -b 64M -e 1G
#
# The peer: nccl-tests' all_reduce_perf (in --nccl-tests DIR, else on PATH), else NetPIPE's
# NPmpi (Debian: NPopenmpi; two ranks, run with -2 -a: both ranks send at once, as
# mpibench's sendrecv). Each runs under the mpirun of the MPI library it was built with
# (found from the library it links), mpibench under its own (launch/mpirun.sh).
#
# Options: launch/mpirun.sh's (--host --hostfile --ppn --np --iface --bind --oversubscribe
# --mca --mpi-arg), and
#   --peer NAME       nccl-tests or netpipe (default: nccl-tests when found, else netpipe)
#   --nccl-tests DIR  the folder holding all_reduce_perf
#   -b SIZE, -e SIZE  smallest and largest size, both tools (default 1K and 4M; 64M..1G
#                     for nccl-tests); NetPIPE starts at -b/16, its warm-up
#   -n N, -w N        timed and warm-up iterations, both tools (default 20 and 5)
#   --same-mpi        run mpibench under the peer's MPI too (its mpirun, and mpi4py loading
#                     its library through MPI4PY_LIBMPI): the ratio then compares the two
#                     tools on one MPI library (default: mpibench under its own, as it runs)
#   --out DIR         where the outputs go (default ./verify-DATE-TIME; never reused)
#   -- ARGS           more arguments for mpibench verify (e.g. --sizes, --rounds)
# Variables: PEER_MPIRUN, the mpirun for the peer (default: found from its MPI library);
# MPIBENCH_PYTHON and MPIRUN as for launch/mpirun.sh.
# Exit: verify's code (0 every check passed, 1 one did not, 2 bad input); 2 when no peer
# is found or the peer fails.
set -euo pipefail

die() { printf 'verify.sh: %s\n' "$*" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

launch=() peer="" nccl_dir="" minb="" maxb="" iters=20 warmup=5 out="" same_mpi=0
while (($#)); do
  case $1 in
    --host|--hosts|--hostfile|--ppn|--np|--iface|--bind|--mpi-arg)
      (($# >= 2)) || die "$1 needs a value"; launch+=("$1" "$2"); shift 2 ;;
    --mca) (($# >= 3)) || die "--mca needs NAME VALUE"; launch+=("$1" "$2" "$3"); shift 3 ;;
    --oversubscribe) launch+=("$1"); shift ;;
    --peer) (($# >= 2)) || die "--peer needs nccl-tests or netpipe"; peer=$2; shift 2
            [[ $peer =~ ^(nccl-tests|netpipe)$ ]] || die "--peer: nccl-tests or netpipe" ;;
    --nccl-tests) (($# >= 2)) || die "--nccl-tests needs a folder"; nccl_dir=$2; shift 2
                  [[ -d $nccl_dir ]] || die "--nccl-tests $nccl_dir: no such folder" ;;
    -b) (($# >= 2)) || die "-b needs a size"; minb=$2; shift 2 ;;
    -e) (($# >= 2)) || die "-e needs a size"; maxb=$2; shift 2 ;;
    -n) (($# >= 2)) && [[ $2 =~ ^[1-9][0-9]*$ ]] || die "-n needs a whole number >= 1"; iters=$2; shift 2 ;;
    -w) (($# >= 2)) && [[ $2 =~ ^[0-9]+$ ]] || die "-w needs a whole number >= 0"; warmup=$2; shift 2 ;;
    --out) (($# >= 2)) || die "--out needs a folder"; out=$2; shift 2 ;;
    --same-mpi) same_mpi=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (mpibench verify's own options go after --)" ;;
  esac
done

# Sizes in bytes: NetPIPE takes plain numbers.
bytes() {
  [[ $1 =~ ^([0-9]+)([KMGkmg]?)$ ]] || die "bad size '$1' (e.g. 1024, 64K, 4M, 1G)"
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2]^^}
  case $unit in K) n=$((n << 10)) ;; M) n=$((n << 20)) ;; G) n=$((n << 30)) ;; esac
  echo "$n"
}

# The peer.
a2a=""
if [[ -n $nccl_dir ]]; then a2a=$nccl_dir/all_reduce_perf; [[ -x $a2a ]] || die "no all_reduce_perf in $nccl_dir"
else a2a=$(command -v all_reduce_perf || true)
fi
np_bin=$(command -v NPmpi || command -v NPopenmpi || true)
if [[ -z $peer ]]; then
  if [[ -n $a2a ]]; then peer=nccl-tests; elif [[ -n $np_bin ]]; then peer=netpipe
  else die "no peer found: install NetPIPE (Debian: apt-get install netpipe-openmpi) or give --nccl-tests DIR"
  fi
fi
if [[ $peer == nccl-tests ]]; then
  [[ -n $a2a ]] || die "no all_reduce_perf on PATH: give --nccl-tests DIR"
  bin=$a2a minb=${minb:-64M} maxb=${maxb:-1G} file=nccl-tests.txt
else
  [[ -n $np_bin ]] || die "no NPmpi or NPopenmpi on PATH (Debian: apt-get install netpipe-openmpi)"
  bin=$np_bin minb=${minb:-1K} maxb=${maxb:-4M} file=netpipe.txt
fi
lo=$(bytes "$minb") hi=$(bytes "$maxb")
((lo <= hi)) || die "-b $minb is larger than -e $maxb"

# The peer's launcher: the mpirun of the MPI library it links (launcher and library must
# match: Debian's NetPIPE links Open MPI 4, mpibench's venv may hold Open MPI 5).
lib=$(ldd "$bin" 2>/dev/null | awk '/libmpi\.so/ {print $3; exit}')
[[ -n $lib ]] || die "$bin links no MPI library (nccl-tests: build it with make MPI=1)"
if [[ -z ${PEER_MPIRUN:-} ]]; then
  dir=$(dirname "$(readlink -f "$lib")")
  for prefix in "$dir/.." "$dir/../.." "$dir/../../.."; do
    for name in mpirun.openmpi mpirun; do
      if [[ -x $prefix/bin/$name ]]; then PEER_MPIRUN=$(cd "$prefix/bin" && pwd)/$name; break 2; fi
    done
  done
  [[ -n ${PEER_MPIRUN:-} ]] || die "no mpirun found for $lib: set PEER_MPIRUN"
fi

# The python for compare: as launch/mpirun.sh picks it.
source "$here/python.sh"
pick_python "$(cd "$here/.." && pwd)" || die "$PICK_ERROR"
python=$PICKED_PYTHON

# The output folder: new, never an existing one.
if [[ -z $out ]]; then out=verify-$(date +%Y%m%d-%H%M%S); fi
mkdir "$out" 2>/dev/null || die "--out $out exists or cannot be made: give a new folder"

echo "# verify.sh: peer $peer ($bin) under $PEER_MPIRUN, sizes $lo..$hi bytes, $iters iterations after $warmup warm-up; outputs in $out"
if [[ $peer == nccl-tests ]]; then
  peer_args=(-b "$lo" -e "$hi" -f 2 -n "$iters" -w "$warmup" -c 1)
else
  # With -n NetPIPE warms nothing up: its first size would carry the connection's set-up
  # and TCP's slow start. It starts 16x below -b; those sizes are left out of its file.
  start=$((lo / 16 > 0 ? lo / 16 : 1))
  peer_args=(-2 -a -l "$start" -u "$hi" -p 0 -n "$iters" -o "$out/netpipe.np.out")
fi
set +e
# One file for both streams: NetPIPE prints its rows partly on each.
MPIRUN=$PEER_MPIRUN "$here/mpirun.sh" "${launch[@]}" --program "$bin" "${peer_args[@]}" \
  >"$out/raw-$file" 2>&1
rc=$?
set -e
if ((rc != 0)); then
  tail -n 5 "$out/raw-$file" >&2
  die "the peer exited $rc (its output: $out/raw-$file)"
fi
if [[ $peer == netpipe ]]; then     # its warm-up sizes below -b left out
  awk -v lo="$lo" '!/ bytes +[0-9]+ times -->/ || $2 >= lo' "$out/raw-$file" >"$out/$file"
else
  cp "$out/raw-$file" "$out/$file"
fi
rows=$(grep -E 'bytes .* times -->|^ +[0-9]+ +[0-9]+ +[a-z]' "$out/$file" || true)
if [[ -z $rows ]]; then     # exit 0 and no rows: a peer's crash its launcher did not pass on
  tail -n 5 "$out/raw-$file" >&2
  die "the peer printed no results from $lo bytes up (its output: $out/raw-$file)"
fi
sed 's/^/# peer: /' <<<"$rows"

mine=()
if ((same_mpi)); then
  mine=(env MPIRUN="$PEER_MPIRUN" MPI4PY_LIBMPI="$lib")
  echo "# mpibench under the peer's MPI: $PEER_MPIRUN, $lib"
fi
set +e
"${mine[@]}" "$here/mpirun.sh" "${launch[@]}" verify --against "$out/$file" -n "$iters" \
  -w "$warmup" --json "$out/verify.json" "$@"
rc=$?
set -e
[[ -f $out/verify.json ]] || exit "$rc"
echo "#"
echo "# mpibench / $peer per size (mpibench compare $out/$file $out/verify.json):"
"$python" -m mpibench compare "$out/$file" "$out/verify.json" || { c=$?; ((rc)) || rc=$c; }
exit "$rc"

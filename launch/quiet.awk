# Filters a launcher's stderr (launch/mpirun.sh, sbatch/common.sh): Open MPI's and SLURM's
# own text for a job that mpibench ended itself becomes one line; NUL bytes (prterun ends
# its banners with one) are dropped; everything else passes unchanged, as it comes.
# (mawk or gawk: no {n,m} in the patterns.)
function out(text) { printf "%s\n", text; fflush() }
function known(text) {
  return text ~ /MPI_ABORT was invoked on rank|(prterun|mpirun|mpiexec)[^ ]* (has exited due to process rank|detected that one or more processes exited with non-zero status)|Primary job +terminated normally|Open MPI failed to TCP connect to a peer/
}
function ended() {
  if (!said) out("launcher: its own report of how the job ended is left out; the exit code and the verdict line (stdout) are mpibench's")
  said = 1
}
{ nul = gsub(/\000/, "") }
nul && /^ *$/ { next }
/^--------------------+ *$/ {
  if (inblock) {
    inblock = 0
    if (known(block)) ended(); else { out(dashes); printf "%s", block; out($0) }
  } else { inblock = 1; block = ""; dashes = $0 }
  next
}
inblock { block = block $0 "\n"; next }
/^ *\[[^]]*\] \*\*\* / { next }        # Open MPI's fatal error handler on a rank being stopped
/^srun: error: .*: tasks? [0-9,-]+: Exited with exit code/ { ended(); next }
{ out($0) }
END { if (inblock) { out(dashes); printf "%s", block } }

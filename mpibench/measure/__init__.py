"""Stage 2, measure: what is timed and how.

engine runs the sweep (buffers, timing, checks, gathering each row); collectives/ says
what each collective's row means; backends/ makes the calls (torch.distributed, MPI) and
times them (backends/timing: the -z loops); p2p times pairs of ranks; sizes, dtypes and
modes are the units of a sweep; row is a results row's type; looptrace (test-only)
records what a timed loop did.

The engine reports to a duck-typed sink on rank 0 (see Engine), so it never needs the
results or diagnose stages.

May import: errors, launch.
"""

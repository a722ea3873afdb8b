"""Stage 2, measure: what is timed and how.

The engine reports to a duck-typed sink on rank 0 (see Engine), so it never needs the
results or diagnose stages.

May import: errors, launch.
"""

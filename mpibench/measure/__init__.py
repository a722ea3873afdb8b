"""Stage 2, measure: what is timed and how.

The engine reports to a sink on rank 0 (engine.Report), so it never needs the results or diagnose stages.

May import: errors, launch.
"""

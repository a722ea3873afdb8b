"""Stage 4, diagnose: which rank, host or link is slow, and why.

May import: errors, launch, measure, results.
"""

"""Stage 1, launch: from the launcher's variables to a running job.

May import: mpibench.errors and the package's __version__ only.
"""

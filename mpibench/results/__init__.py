"""Stage 3, results: the results document, from the first row to the file on disk.

May import: errors, launch, measure.
"""

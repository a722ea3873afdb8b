"""Stage 3, results: the results document, from the first row to the file on disk.

document starts a results document (new) and loads one back validated (load,
measurements); files reserves and atomically rewrites result files (JSON, CSV);
output is rank 0's live output of a run; reader is what the analysis commands read of
a saved document; rows builds a row and says what identifies it; tables formats rows as
nccl-tests does; trials merges repeated sweeps; nccltests reads nccl-tests' printed
output and -J JSON as documents and writes its -J schema.
checktext prints check's lines, its table of hosts and its CSV.
schema holds the document's types (a row's are in measure/row.py) and checks a file read
back against them; trainfigures computes train's figures from its steps; traintext
writes train's text (train, report, compare, sweep).
numbers writes a figure in text (n/a when unknown, ms, us, percent, ratio).

May import: errors, launch, measure.
"""

"""Stage 3, results: the results document, from the first row to the file on disk.

document defines the results document and loads it back validated (schema, load,
measurements); files reserves and atomically rewrites result files (JSON, CSV);
output is rank 0's live output of a run; reader is what the analysis commands read of
a saved document; tables formats rows as nccl-tests does; trials merges repeated sweeps;
nccltests reads nccl-tests' printed output and -J JSON as documents and writes its -J schema.
traindoc checks a document's train part; trainfigures computes train's figures from its
steps; traintext writes train's text (train, report, compare, sweep).
numbers writes a figure in text (n/a when unknown, ms, us, percent, ratio).

May import: errors, launch, measure.
"""

"""The documented name for reading a results file back: mpibench.resultsfile.load(path).
The results document itself lives in results.document."""
from .results.document import load, measurements, validate  # noqa: F401

"""The documented name for reading a results file back: mpibench.resultsfile.load(path).
The results document itself lives in results.document."""
from .results.document import measurements, validate  # noqa: F401
from .results.reader import load  # noqa: F401

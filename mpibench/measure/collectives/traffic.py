"""alltoallv's traffic, the bytes rank i sends rank j, as nccl-tests 2.19's src/alltoallv.cu
makes them: a generated pattern between uniform (spread 0) and distance-weighted (spread 1),
in which every rank sends and receives the same total, or a matrix file, scaled. Every
per-peer size is cut down to a multiple of 16 bytes, as there."""
import math
import os
import re
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

SPREAD_ENV = "NCCL_TESTS_ALLTOALLV_SPREAD"
MATRIX_ENV = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"
SCALE_ENV = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE"
DEFAULT_SPREAD = 1.0          # nccl-tests' default: fully distance-weighted
ALIGN = 16
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


class BadMatrix(ValueError):
    """A matrix file that cannot be used: the reason, in one line."""


def aligned(nbytes: float) -> int:
    return int(nbytes) & ~(ALIGN - 1)


@dataclass(frozen=True)
class Traffic:
    spread: float = DEFAULT_SPREAD
    matrix: Optional[Tuple[Tuple[int, ...], ...]] = None   # bytes i -> j, scaled and aligned
    scale: float = 1.0
    source: Optional[str] = None                            # the matrix file
    dim: int = 0                                            # the file's rows and columns

    @property
    def generated(self) -> bool:
        return self.matrix is None

    def peer_bytes(self, i: int, j: int, n: int, total: int) -> int:
        """Bytes rank i sends rank j; total: what each rank sends in all (generated pattern)."""
        if self.matrix is not None:
            return self.matrix[i][j]
        if n == 1:
            return aligned(total)
        distance = (j - i + n) % n
        uniform = total / n
        weighted = distance * total / (n * (n - 1) // 2)
        return aligned((1.0 - self.spread) * uniform + self.spread * weighted)

    def sends(self, rank: int, n: int, total: int) -> List[int]:
        return [self.peer_bytes(rank, j, n, total) for j in range(n)]

    def receives(self, rank: int, n: int, total: int) -> List[int]:
        return [self.peer_bytes(j, rank, n, total) for j in range(n)]

    def per_rank(self, n: int, total: int) -> List[Tuple[int, int]]:
        """(bytes sent, bytes received) of every rank."""
        return [(sum(self.sends(r, n, total)), sum(self.receives(r, n, total))) for r in range(n)]

    def max_elements(self, n: int, total: int, elsize: int) -> Tuple[int, int]:
        """(most elements any rank sends, most any rank receives): the buffers' counts."""
        if self.matrix is None:        # symmetric and balanced: one rank says it
            each = sum(b // elsize for b in self.sends(0, n, total))
            return each, each
        send = max(sum(b // elsize for b in self.sends(r, n, total)) for r in range(n))
        recv = max(sum(b // elsize for b in self.receives(r, n, total)) for r in range(n))
        return send, recv

    def describe(self, n: int) -> str:
        if self.matrix is None:
            return (f"generated pattern, spread {self.spread:g} (0 uniform, 1 distance-weighted): "
                    f"every rank sends and receives the same total")
        dim = self.dim or len(self.matrix)
        used = f", its first {n} rows and columns used" if dim > n else ""
        return f"matrix {self.source} ({dim}x{dim}{used}), scale {self.scale:g}"


def spread_value(text: str, where: str) -> float:
    """A spread between 0 and 1 (nccl-tests clamps one outside; mpibench refuses it)."""
    try:
        value = float(text)
    except ValueError:
        raise BadMatrix(f"{where}={text!r}: not a number (0.0 uniform .. 1.0 distance-weighted)") from None
    if not 0.0 <= value <= 1.0:
        raise BadMatrix(f"{where}={text!r}: the spread lies between 0.0 (uniform) and 1.0 "
                        f"(distance-weighted)")
    return value


def scale_value(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadMatrix(f"{where}={text!r}: not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise BadMatrix(f"{where}={text!r}: the scale must be a finite number, 0 or more")
    return value


def parse_matrix(text: str, where: str, scale: float = 1.0) -> Tuple[Tuple[int, ...], ...]:
    """A square whitespace-separated matrix of bytes (one row a line, blank lines ignored),
    each entry times scale, aligned down to 16 bytes; BadMatrix with the place of a fault."""
    rows: List[List[int]] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        tokens = line.split()
        if not tokens:
            continue
        row = []
        for col, token in enumerate(tokens, 1):
            if not _NUMBER.match(token):
                raise BadMatrix(f"{where}: line {line_no} column {col}: {token[:20]!r} is not a "
                                f"number of bytes")
            value = float(token)
            if value < 0:
                raise BadMatrix(f"{where}: line {line_no} column {col}: {token} is negative "
                                f"(bytes rank {len(rows)} sends rank {col - 1})")
            scaled = value * scale
            if not math.isfinite(scaled) or scaled >= 2 ** 63:
                raise BadMatrix(f"{where}: line {line_no} column {col}: {token} x scale {scale:g} "
                                f"is too large")
            row.append(aligned(scaled))
        if rows and len(row) != len(rows[0]):
            raise BadMatrix(f"{where}: line {line_no} has {len(row)} values, the first row "
                            f"{len(rows[0])}: the matrix must be square")
        rows.append(row)
    if not rows:
        raise BadMatrix(f"{where}: empty, no matrix")
    if len(rows) != len(rows[0]):
        raise BadMatrix(f"{where}: {len(rows)} rows of {len(rows[0])} values: the matrix must be square")
    return tuple(tuple(r) for r in rows)


def fit(matrix: Tuple[Tuple[int, ...], ...], n: int, where: str) -> Tuple[Tuple[int, ...], ...]:
    """The matrix for n ranks: its first n rows and columns (nccl-tests takes a larger one so);
    BadMatrix when it has fewer."""
    if len(matrix) < n:
        raise BadMatrix(f"{where}: a {len(matrix)}x{len(matrix)} matrix for {n} ranks: it needs "
                        f"at least {n} rows and columns (bytes rank i sends rank j)")
    return tuple(tuple(r[:n]) for r in matrix[:n])


def from_settings(spread: Optional[str], matrix_text: Optional[str], source: Optional[str],
                  scale: Optional[str], n: int, environ: Mapping[str, str] = os.environ,
                  ) -> Traffic:
    """The traffic of the options (their text; None: not given), else of nccl-tests' variables;
    matrix_text: the matrix file's content, read by the caller."""
    scale_text, scale_where = (scale, "--alltoallv-scale") if scale is not None else \
        (environ.get(SCALE_ENV), SCALE_ENV)
    if source is not None and matrix_text is not None:
        factor = scale_value(scale_text, scale_where) if scale_text is not None else 1.0
        read = parse_matrix(matrix_text, source, factor)
        return Traffic(matrix=fit(read, n, source), scale=factor, source=source, dim=len(read))
    if scale is not None:
        raise BadMatrix("--alltoallv-scale scales a matrix: give --alltoallv-matrix FILE too")
    if spread is not None:
        return Traffic(spread=spread_value(spread, "--alltoallv-spread"))
    if (env := environ.get(SPREAD_ENV)) is not None:
        return Traffic(spread=spread_value(env, SPREAD_ENV))
    return Traffic()


def splits(elements: Sequence[int]) -> Tuple[List[int], List[int]]:
    """(counts, displacements) of consecutive blocks."""
    displs, at = [], 0
    for k in elements:
        displs.append(at)
        at += k
    return list(elements), displs

"""What plot prints beside its picture: the tests it draws, the entries skipped, the file."""
from typing import Any, Dict, Optional, Sequence, Tuple

from ..launch import verdict
from . import reader


def tests_note(docs: Sequence[Tuple[str, Dict[str, Any]]], test: Optional[int]) -> None:
    """One line per file that holds several tests, or whose --test N is drawn."""
    for path, doc in docs:
        held = reader.tests(doc)
        if len(held) > 1:       # each test its own line: repeats never merge into one series
            verdict.out(f"# {path}: {len(held)} tests, each drawn as its own line "
                              "(test N; --test N draws one)")
        elif test is not None and held:
            verdict.out(f"# {path}: test {test} ({held[0]['collective']}, line {held[0]['line']})")


def skipped(name: str, why: str) -> None:
    verdict.out(f"# {name}: p2p entry skipped: {why}")


def wrote(out: Any) -> None:
    """out: the picture's ResultFile."""
    verdict.out(f"# {out.requested} exists: wrote {out.path} instead (never overwritten)"
                if out.path != out.requested else f"# wrote {out.path}")

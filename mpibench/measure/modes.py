"""The two ways a collective is timed, and their keys in a row of the results document."""
from typing import Dict, Literal, Tuple

ModeKey = Literal["out_of_place", "in_place"]
MODES: Tuple[ModeKey, ...] = ("out_of_place", "in_place")
MODE_KEYS: Dict[str, ModeKey] = dict(zip(("out", "in"), MODES))     # plan mode -> results document key
MODE_TEXT = {m: k.replace("_", "-") for m, k in MODE_KEYS.items()}   # as the tables print it

"""What sweep prints: what it runs, each setting as it starts and ends, the settings compared."""
from typing import Any, Dict, Optional, Sequence, Tuple

from ..launch import verdict
from ..measure.sizes import format_size
from . import numbers, reader
from .tables import commented


def header(nsettings: int, swept: Sequence[str], command: Sequence[str], openmpi: bool,
           announcement: str, folder: str) -> None:
    verdict.out(f"# mpibench sweep: {numbers.counted(nsettings, 'setting')} of "
                f"{', '.join(swept)}; columns below are {'/'.join(swept)}")
    verdict.out(f"# command: {' '.join(command)}" + ("  (Open MPI: variables forwarded with -x)"
                                                    if openmpi else ""))
    verdict.out(f"{announcement}; each setting's results in {folder}/")


def setting(which: str, name: str) -> None:
    verdict.out(f"#\n# setting {which}: {name}")


def setting_done(which: str, record: Dict[str, Any], part: Optional[Dict[str, Any]], ok: bool,
                 rc: Optional[int], why: Optional[str]) -> None:
    verdict.out(f"# setting {which}: " + (
              f"done in {record['elapsed_s']:.1f} s, {len(part['results'])} rows" if ok and part else
              f"FAILED (exit code {rc}{', ' + why if why else ''}"
              f"{', ' + record['error'] if 'error' in record else ''})"))


def summary(doc: Dict[str, Any], names: Sequence[str], labels: Dict[str, str], wanted: Optional[str]) -> None:
    """Per collective and size: each setting's busbw and the best; then each setting's train steps."""
    table: Dict[Tuple[str, str, str, str], Dict[int, Dict[str, Tuple[float, str]]]] = {}
    for row in doc["results"]:
        mode = reader.first_mode(row, wanted)
        if mode is None or (bw := reader.bandwidth(row, mode)) is None:
            continue
        group = (row["collective"], row.get("dtype", row["type"]), row["redop"], mode)
        table.setdefault(group, {}).setdefault(row["size"], {})[row["setting"]] = (bw[0], bw[3])
    lines = []
    for (coll, dtype, redop, mode), per_size in table.items():
        metric = next(iter(next(iter(per_size.values())).values()))[1]
        lines.append(f"#\n# {coll} {dtype}{'' if redop == 'none' else ' ' + redop}, "
                     f"{mode.replace('_', '-')} {metric} (GB/s)")
        rows = [[format_size(size)] + ["-" if n not in per else f"{per[n][0]:.4g}" for n in names]
                + [labels[max(per.items(), key=lambda x: x[1][0])[0]]]      # the best
                for size, per in sorted(per_size.items())]
        lines += commented(rows, ["size"] + [labels[n] for n in names] + ["best"])
    if trained := [[labels[r["setting"]], numbers.ms(t["step_s"]), f"{t['tokens_per_s']:.1f}",
                    numbers.pct(t.get("exposed_share")), numbers.pct(t.get("hidden_share"))]
                   for r in doc["settings"] for t in [r.get("train")] if t]:
        lines += ["#\n# train steps per setting"] + commented(
            trained, ["setting", "step ms", "tokens/s", "exposed", "hidden"])
    for line in lines:
        verdict.out(line)

#!/usr/bin/env python3
"""How far `mpibench predict` is from what real clusters measured: for every dataset of
shared/realworld/scaling (one cluster, one software setup per folder), predict each larger
node count of a collective from its two smallest, check against the published run, and
print the errors as a table (one `mpibench predict` process per row, as a user runs it).

    .venv/bin/python bench/predict_real.py [--data DIR] [--quick]

DIR defaults to ../shared/realworld/scaling beside the repository (or /work/shared/...).
--quick (seconds, for CI): ALCF Polaris env5 all_reduce and all_to_all (the ring/tree
model and the exchanges'), 540 nodes from 2 and 8.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACES = [ROOT.parent / "shared" / "realworld" / "scaling", Path("/work/shared/realworld/scaling")]
NAME = re.compile(r"N(\d+)_G(\d+)_([a-z_]+?)(?:__(\w+))?\.txt$")
LOGNAME = {"alltoall": "all_to_all"}       # the log's *_perf name -> mpibench's
SUMMARY = re.compile(r"^# prediction vs measured at (\d+) ranks \(.*\)(, sizes >= 1 MiB)?: "
                     r"median \|error\| ([\d.]+)%, max ([\d.]+)% \(.*\), (\d+) rows, (\d+) of \d+ inside "
                     r"the interval, (\d+) more not predicted")
ROW = re.compile(r"^#\s+(\d+) (B|KiB|MiB|GiB)\s.*\s([\d.]+)\s+([\d.]+)-([\d.]+)\s+\S+\s+\S+(?: \*)?"
                 r"\s+([\d.]+)\s+([-+][\d.]+)%\s+(yes|no)$")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
QUICK = {("alcf_polaris/nccl2.18-nvhpc23.9_env5", c, "", 540) for c in ("all_reduce", "all_to_all")}


def data_dir(given=None):
    for p in [Path(given)] if given else PLACES:
        if p.is_dir():
            return p
    return None


def cases(data):
    """[(dataset, collective, variant, {nodes: path}, gpus per node)] of every folder."""
    out = {}
    for path in sorted(data.rglob("N*_G*_*.txt")):
        m = NAME.search(path.name)
        if not m:
            continue
        key = (str(path.parent.relative_to(data)), LOGNAME.get(m[3], m[3]), m[4] or "")
        out.setdefault(key, ({}, int(m[2])))[0][int(m[1])] = path
    return [(d, c, v, files, g) for (d, c, v), (files, g) in out.items()]


def run_case(files, collective, target):
    """The summary lines of one predict --measured run: {label: (median, max, rows, inside,
    not predicted)}."""
    nodes = sorted(files)[:2]
    done = subprocess.run([sys.executable, "-m", "mpibench", "predict", *(str(files[n]) for n in nodes),
                           "--hosts", str(target), "--measured", str(files[target]),
                           "--collective", collective],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    if done.returncode:
        sys.exit(f"predict failed ({done.returncode}): {done.stderr.strip()}")
    found, narrow = {}, [0, 0]
    for line in done.stdout.splitlines():
        m = SUMMARY.match(line)
        if m:
            found[">= 1 MiB" if m[2] else "all"] = (float(m[3]), float(m[4]), int(m[5]), int(m[6]),
                                                    int(m[7]))
        m = ROW.match(line)
        if m and int(m[1]) * UNITS[m[2]] >= 1 << 20 and abs(float(m[7])) <= 20:
            t, lo, hi = float(m[3]), float(m[4]), float(m[5])
            narrow[0] += 1          # within 20%: is the interval within +-35%?
            narrow[1] += lo >= 0.65 * t and hi <= 1.35 * t
    return nodes, found, narrow


def table(data, quick=False):
    """The table's lines: one row per prediction, then a total."""
    rows = []
    for dataset, coll, variant, files, g in cases(data):
        for target in sorted(files)[2:]:
            if quick and (dataset, coll, variant, target) not in QUICK:
                continue
            nodes, found, narrow = run_case(files, coll, target)
            rows.append((dataset + (f" ({variant})" if variant else ""), coll,
                         f"{nodes[0]},{nodes[1]} -> {target} (x{g})", found, narrow))
    out = [("| dataset | collective | nodes | median error >= 1 MiB | max >= 1 MiB | inside >= 1 MiB "
            "| not predicted >= 1 MiB | within +-35% | median error, all sizes | inside, all sizes |"),
           "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(f, i):
        return "-" if f is None else f"{f[i]:.1f}%"

    def inside(f):
        return "-" if f is None else f"{f[3]} of {f[2]}"
    for dataset, coll, nodes, found, narrow in rows:
        big, every = found.get(">= 1 MiB"), found.get("all")
        out.append(f"| {dataset} | {coll} | {nodes} | {cell(big, 0)} | {cell(big, 1)} | {inside(big)} "
                   f"| {big[4] if big else '-'} | {narrow[1]} of {narrow[0]} | {cell(every, 0)} "
                   f"| {inside(every)} |")
    big = [f[">= 1 MiB"] for *_, f, _ in rows if ">= 1 MiB" in f]
    if big:
        inside, total, guesses = (sum(f[k] for f in big) for k in (3, 2, 4))
        narrow = [sum(r[4][k] for r in rows) for k in (0, 1)]
        out.append(f"# {len(rows)} predictions; sizes >= 1 MiB: {inside} of {total} predicted points "
                   f"inside the interval ({inside / total:.0%}), {narrow[1]} of the {narrow[0]} within "
                   f"20% with an interval within +-35%, {guesses} more not predicted")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="the folder of datasets (default: see above)")
    p.add_argument("--quick", action="store_true", help="two predictions (seconds)")
    args = p.parse_args()
    data = data_dir(args.data)
    if data is None:
        sys.exit(f"no data: none of {', '.join(map(str, PLACES))} exists (give --data DIR)")
    print("\n".join(table(data, args.quick)))


if __name__ == "__main__":
    main()

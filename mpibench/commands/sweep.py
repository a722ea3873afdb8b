"""mpibench sweep: the same benchmark once per setting of environment variables, each in a
fresh launch, as NCCL reads most of its variables once per process (docs/commands/sweep.md)."""
import argparse
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from ..errors import Exit, UsageError
from ..measure.modes import MODE_KEYS
from ..results import document, reader, sweeptext
from ..results.files import json_parts, ResultFile
from ..results.schema import Doc
from .common import options

HELP = "run the benchmark once per setting of NCCL (or any) variables and compare them"
SESSION = "offline"
DEFAULT_SETS = (("NCCL_ALGO", ("Ring", "Tree")), ("NCCL_PROTO", ("LL", "LL128", "Simple")))
OPENMPI = ("mpirun", "mpiexec", "orterun", "prterun", "oshrun")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
Swept = Tuple[str, Tuple[str, ...]]     # --set NAME=V1,V2: the name and its values


def parse_set(text: str) -> Swept:
    name, sep, values = text.partition("=")
    vals = [v.strip() for v in values.split(",")]
    if not sep or not _NAME.fullmatch(name.strip()) or not all(vals):
        raise argparse.ArgumentTypeError(f"{text!r}: use NAME=V1,V2,... (e.g. NCCL_ALGO=Ring,Tree)")
    if len(set(vals)) != len(vals):
        raise argparse.ArgumentTypeError(f"{text!r}: a value is given twice")
    return name.strip(), tuple(vals)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.usage = "mpibench sweep [--set NAME=V1,V2]... [OPTIONS] -- COMMAND ..."
    p.add_argument("--set", dest="sets", action="append", type=parse_set, default=[],
                   metavar="NAME=V1,V2", help="a variable and its values; repeat for more "
                   "variables (every combination runs). Default: NCCL_ALGO=Ring,Tree and "
                   "NCCL_PROTO=LL,LL128,Simple")
    p.add_argument("--json", default="sweep.json", metavar="PATH",
                   help="merged results (default sweep.json; never overwritten); each "
                        "setting's own file goes into a folder beside it")
    p.add_argument("--mode", choices=("out", "in"), default=None,
                   help="which mode the summary shows (default out-of-place where the "
                        "collective has it, else in-place)")
    p.add_argument("--timeout", type=options.positive_float, default=3600.0, metavar="SECONDS",
                   help="longest one setting's run may take before it is stopped (default 3600)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="do not show each run's own output (errors still show)")
    p.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the launcher command that runs one benchmark")


def settings(sets: Sequence[Swept]) -> List[Dict[str, str]]:
    names = [n for n, _ in sets]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise UsageError(f"--set {sorted(dup)[0]} given twice: give its values once, comma-separated")
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in sets))]


def is_openmpi(launcher: str) -> bool:
    """Open MPI's mpirun takes -x; ask it (MPICH's mpiexec has the same name)."""
    if os.path.basename(launcher) not in OPENMPI:
        return False
    try:
        done = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return "open mpi" in (done.stdout + done.stderr).lower() or "openrte" in done.stdout.lower()


def run_one(argv: List[str], env: Dict[str, str], timeout: float, quiet: bool
            ) -> Tuple[int, Optional[str]]:
    """Start one launch in its own process group; stop the group if it runs too long."""
    proc = subprocess.Popen(argv, env=dict(os.environ, **env), start_new_session=True,
                            stdout=subprocess.DEVNULL if quiet else None)
    # The launch has its own process group (so a timeout can stop all of it): pass a
    # SIGTERM (scancel, kill) on to it as Ctrl-C is.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return proc.wait(timeout=timeout), None
    except subprocess.TimeoutExpired:
        _stop(proc)
        return proc.returncode, f"stopped after {timeout:g} s"
    except KeyboardInterrupt:
        _stop(proc)
        raise Exit("sweep: interrupted: the results so far are in the files", 130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stop(proc: "subprocess.Popen[bytes]") -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=5)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            pass


def parts_folder(merged_path: str) -> str:
    root = os.path.splitext(merged_path)[0]
    for k in range(10000):
        folder = f"{root}.settings" + (f".{k}" if k else "")
        try:
            os.mkdir(folder)
            return os.path.abspath(folder)
        except FileExistsError:
            continue
    raise UsageError(f"cannot make a folder beside {merged_path}: too many exist")


def execute(session: None, args: argparse.Namespace) -> int:
    command = _command(args.launch)
    sets = args.sets or list(DEFAULT_SETS)
    envs = settings(sets)
    swept = [n for n, _ in sets]
    names = [" ".join(f"{k}={v}" for k, v in e.items()) for e in envs]
    labels = {n: "/".join(e.values()) for n, e in zip(names, envs)}
    merged = ResultFile(args.json, json_parts)
    folder = parts_folder(merged.path)
    openmpi = is_openmpi(command[0])
    doc = document.new("sweep", sys.argv[1:], launch=command,
                       swept={n: list(v) for n, v in sets}, settings=[])
    merged.write(doc)
    sweeptext.header(len(envs), swept, command, openmpi, merged.announcement(), folder)
    failed = 0
    for i, (name, env) in enumerate(zip(names, envs), 1):
        path, which = os.path.join(folder, f"setting{i}.json"), f"{i} of {len(envs)}"
        sweeptext.setting(which, name)
        part, ok = _one_setting(doc, name, env, path, args, command, openmpi, which)
        failed += not ok
        merged.write(doc)
        if i == 1 and part is not None:
            _refuse_unread_variables(doc, merged, part, swept)
    sweeptext.summary(doc, names, labels, MODE_KEYS.get(args.mode))
    doc.update(end_time=document.now(), complete=not failed)
    merged.write(doc)
    if failed:
        raise Exit(f"sweep: {failed} of {len(envs)} settings failed (see above)", 1)
    return 0


def _command(launch: List[str]) -> List[str]:
    """The command that runs one benchmark (after --), or UsageError."""
    command = launch[1:] if launch[:1] == ["--"] else launch
    if not command:
        raise UsageError("sweep: give the command that runs one benchmark after --, e.g. "
                         "mpibench sweep --set NCCL_ALGO=Ring,Tree -- mpirun --host n1:8,n2:8 "
                         "python -m mpibench run -b 1M -e 1G")
    if "--json" in command or any(a.startswith("--json=") for a in command):
        raise UsageError("sweep: leave --json out of COMMAND: sweep names each setting's file")
    return command


def _one_setting(doc: Doc, name: str, env: Dict[str, str], path: str, args: argparse.Namespace,
                 command: List[str], openmpi: bool, which: str) -> Tuple[Optional[Doc], bool]:
    """Run one setting, its rows, hosts and record folded into doc; (its document or None, passed)."""
    start = time.monotonic()
    forward = [x for k, v in env.items() for x in ("-x", f"{k}={v}")] if openmpi else []
    argv = [command[0]] + forward + command[1:] + ["--json", path]
    rc, why = run_one(argv, env, args.timeout, args.quiet)
    record: Dict[str, Any] = {"setting": name, "env": env, "file": path, "rc": rc,
              "elapsed_s": round(time.monotonic() - start, 3)}
    try:
        part: Optional[Doc] = cast(Doc, reader.load(path))
    except UsageError as exc:
        part, record["error"] = None, str(exc)
    if part is not None:
        record.update(world=part.get("world"), complete=part.get("complete"),
                      versions=part.get("versions"), run_env=part.get("env"))
        if part.get("train"):
            record["train"] = part["train"].get("summary")
        doc["results"] += [dict(row, setting=name) for row in part["results"]]
        doc["hosts"] += [dict(e, setting=name) for e in part.get("hosts") or [] if isinstance(e, dict)]
        doc.setdefault("world", part.get("world"))
    ok = bool(rc == 0 and part is not None and part.get("complete"))
    sweeptext.setting_done(which, record, part, ok, rc, why)
    doc["settings"].append(record)
    return part, ok


def _refuse_unread_variables(doc: Doc, merged: ResultFile, part: Doc, swept: Sequence[str]) -> None:
    """After the first setting: UsageError when only NCCL_ variables are swept and the runs
    do not use NCCL (the document closed first)."""
    backend = (part.get("world") or {}).get("backend")
    if backend and backend != "nccl" and all(n.startswith("NCCL_") for n in swept):
        doc["end_time"] = document.now()
        merged.write(doc)
        raise UsageError(f"sweep: the runs use {backend}, where NCCL_ variables change "
                         f"nothing: give --set with variables that {backend} reads "
                         f"(e.g. GLOO_SOCKET_IFNAME, OMPI_MCA_*)")

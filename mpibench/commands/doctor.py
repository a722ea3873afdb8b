"""mpibench doctor: every host's setup, what differs between hosts, findings with advice."""
import argparse
import datetime
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..diagnose import findings, hostfacts, nccldiag, ncclinfolog, ncclparams, ncclprobe, pathlimits
from ..launch import bootstrap, faults
from ..launch.session import Session
from ..results import doctortext as text
from ..results.numbers import counted, plural
from ..results.output import open_output
from .common import guard, options

HELP = "check every host's setup: versions, GPUs, NCCL variables, NICs, RDMA; name what differs"
SESSION = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sys-root", default="/", metavar="PATH",
                   help="read /sys and /proc under PATH (default /); '{host}' in it becomes "
                        "each host's name (for fabricated trees)")
    p.add_argument("--no-nccl", action="store_true",
                   help="skip the NCCL transport check on GPUs")
    p.add_argument("--nccl-timeout", type=options.positive_float, default=120.0, metavar="SECONDS",
                   help="time allowed for the NCCL transport check (default 120)")
    options.add_json(p, "every fact and finding as JSON", metrics=False)
    guard.add_timeout(p, "start-up, or gathering every host's facts; the NCCL check gets "
                         "--nccl-timeout more", 120.0)


def execute(session: Session, args: argparse.Namespace) -> int:
    out = open_output(session, "doctor", args)
    root = args.sys_root.replace("{host}", session.hostname)
    session.watch.arm("doctor: every host's facts")
    root, fake = pathlimits.source(session.rank, root)
    facts = dict(hostfacts.collect(session, root, fake), paths=pathlimits.collect(root, fake))
    gathered = session.comm.gather(facts, root=0)
    guard.arm(session, args.timeout + args.nccl_timeout + 30,        # the probe's own limit, and more
              "doctor: the NCCL transport check")
    transports = nccl_check(session, args)
    session.watch.disarm()
    if session.rank != 0:
        return guard.verdict(session, None)
    assert out is not None and gathered is not None
    per_host: Dict[str, Dict[str, Any]] = {}
    ranks: Dict[str, List[int]] = {}
    for f in gathered:
        per_host.setdefault(f["host"], f)
        ranks.setdefault(f["host"], []).append(f["rank"])
    text.hosts(out, per_host, ranks, session.size, session.launcher, findings.VERSION_KEYS)
    diffs = findings.differences(per_host)
    text.consistency(out, diffs, len(per_host))
    found = findings.version_findings(diffs) + findings.findings(per_host) + \
        [f for h, facts in per_host.items() for f in pathlimits.findings(h, facts["paths"])]
    pairs = None if transports["skipped"] else ncclinfolog.by_host_pair(
        [ncclinfolog.parse(t) for t in transports["logs"] if t], session.hosts)
    text.transports(out, transports["skipped"], pairs, transports["errors"], session.size)
    if pairs is not None:
        found += findings.transport_findings(pairs, per_host)
    diag = transports["diagnostics"]
    lines = nccldiag.parse("\n".join(transports["outputs"])) if diag["run"] else []
    text.diagnostics(out, diag, lines)
    found += nccldiag.findings(lines, transports["where"])
    params = _effective(transports)
    text.effective(out, params, transports["where"])
    found += ncclparams.findings(params.get("differ", {}), transports["where"])
    severity = [f.severity == findings.ERROR for f in found]
    text.findings(out, found, severity)
    errors = sum(severity)
    out.set(doctor={"hosts": {h: dict(f, ranks=ranks[h]) for h, f in per_host.items()},
                    "differences": [{"fact": label, "values": values} for label, values in diffs],
                    "findings": [{"host": f[0], "text": f[1], "severity": f.severity}
                                 for f in found],
                    "nccl_transports": None if pairs is None else
                    [{"hosts": list(k), "transports": v} for k, v in pairs.items()],
                    "nccl_diagnostics": dict(diag, lines=[vars(x) for x in lines]),
                    "nccl_params": params,
                    "nccl_check": {k: v for k, v in transports.items()
                                   if k not in ("logs", "outputs", "diagnostics")}})
    out.finish()
    return guard.verdict(session, _failure(transports["errors"], errors))


def _effective(transports: Dict[str, Any]) -> Dict[str, Any]:
    """NCCL's effective parameters per rank as its probe read them, what differs across ranks
    and from the environment, or why they were not read (rank 0)."""
    if transports["skipped"]:
        return {"read": False, "why": ncclparams.why_not(transports["skipped"]), "ranks": []}
    got = ncclparams.collect(transports["outputs"])
    differ, ignored = ncclparams.compare(got, transports["where"])
    return {"read": any(g and g["values"] is not None for g in got),
            "why": ncclparams.reasons(got, transports["where"]),
            "ranks": got, "differ": differ,
            "ignored": [{"rank": r, "key": k, "env": e, "effective": v} for r, k, e, v in ignored]}


def _failure(not_run: Sequence[str], errors: int) -> Optional[str]:
    """Why doctor exits 1, or None: one of its own checks could not run (the report is then
    incomplete, whatever else it found), or it found problems that break runs."""
    if not_run:
        return (f"mpibench doctor: {counted(len(not_run), 'check')} failed to run, the report is "
                f"incomplete; first: {not_run[0]}")
    if errors:
        return (f"doctor found {counted(errors, 'problem')} that {plural(errors, 'breaks', 'break')} "
                "runs (ERROR above)")
    return None


def nccl_check(session: Session, args: argparse.Namespace) -> Dict[str, Any]:
    """Every rank: a fresh process runs a short NCCL all_reduce with NCCL_DEBUG=INFO into
    its own log file, and with NCCL 2.31's diagnostics on where every rank has it. Returns
    {'skipped': why or None, 'logs': [text per rank], 'outputs': [stdout per rank] (rank 0),
    'errors': [why the check failed to run, per failing rank] (every rank), 'where': [(host,
    CUDA device) per rank], 'diagnostics': {'run': bool, 'why': why not, 'nccl': versions}}."""
    versions = session.comm.allgather(_nccl_version(args))
    diag = _diagnostics(versions)
    empty: Dict[str, Any] = {"skipped": None, "logs": [], "outputs": [], "errors": [], "where": [],
                             "diagnostics": diag}
    skipped = _cannot_check_anywhere(session, args)
    if skipped:
        return dict(empty, skipped=skipped, diagnostics=_not_run(diag, skipped))
    device, failed = _device(session)
    whys = [w for w in session.comm.allgather(failed) if w]
    if whys:
        return dict(empty, skipped=whys[0], diagnostics=_not_run(diag, whys[0]))
    placed = session.comm.allgather((session.hostname, device))
    # rank 0 serves the probes' rendezvous; each rank's probe process joins it
    store, addr, port = bootstrap.rank0_store(
        session, os.environ, datetime.timedelta(seconds=args.nccl_timeout), join=False)
    error, said, text = _probe(session, args, diag,
                               f"{addr} {port} {session.rank} {session.size} {device}")
    logs = session.comm.gather(text, root=0) or []      # [] but on rank 0
    outputs = session.comm.gather(said, root=0) or []
    errors = [e for e in session.comm.allgather(error) if e]
    del store
    return dict(empty, logs=logs, outputs=outputs, errors=errors, where=placed)


def _cannot_check_anywhere(session: Session, args: argparse.Namespace) -> Optional[str]:
    """Why the NCCL check cannot run, where any rank cannot (naming the first such rank unless
    every rank cannot), or None."""
    bad = [(r, why) for r, why in enumerate(session.comm.allgather(_cannot_check(session, args)))
           if why]
    if not bad:
        return None
    r, why = bad[0]
    where = "" if len(bad) == session.size else f"rank {r} ({session.hosts[r]}): "
    return where + why


def _device(session: Session) -> Tuple[Optional[int], Optional[str]]:
    """(this rank's CUDA device for the probe, why none or None), agreed by every rank."""
    planted = faults.get("ncclcheck", session.rank)     # test switch: the GPUs this rank sees
    gpus = None if planted is None else (planted.split("/") if planted else [f"gpu-{session.rank}"])
    return bootstrap.gpu_index(session, os.environ, gpus)


def _probe(session: Session, args: argparse.Namespace, diag: Dict[str, Any], probe: str
           ) -> Tuple[Optional[str], str, str]:
    """(why the probe failed or None, what it printed, its NCCL log) of this rank's probe
    process, run in a folder of its own; probe: its MPIBENCH_PROBE (addr port rank size device)."""
    folder = tempfile.mkdtemp(prefix="mpibench-nccl-")
    try:
        log = os.path.join(folder, "nccl.log")
        env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=log,
                   MPIBENCH_PROBE=probe,
                   MPIBENCH_PROBE_TIMEOUT=str(args.nccl_timeout),
                   **(nccldiag.VARIABLES if diag["run"] else {}))
        error, said = _run_probe(session, args, env)
        text = _read_log(log)
    finally:    # not TemporaryDirectory: its ignore_cleanup_errors needs Python 3.10
        shutil.rmtree(folder, ignore_errors=True)
    return error, said, text


def _run_probe(session: Session, args: argparse.Namespace, env: Dict[str, str]
               ) -> Tuple[Optional[str], str]:
    """(why the probe process failed or None, what it printed) of one run of it."""
    error = None
    try:
        done = subprocess.run([sys.executable, "-m", ncclprobe.__name__], env=env,
                              capture_output=True, text=True, timeout=args.nccl_timeout + 30)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            error = (f"the NCCL check failed on rank {session.rank} ({session.hostname}), exit "
                     f"{done.returncode}: {tail}")
        said = done.stdout
    except subprocess.TimeoutExpired as exc:
        error = f"the NCCL check did not finish on rank {session.rank} ({session.hostname})"
        said = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
    return error, said


def _read_log(log: str) -> str:
    """The probe's NCCL log, or "" where it wrote none."""
    try:
        return pathlib.Path(log).read_text(errors="replace")
    except OSError:
        return ""


def _nccl_version(args: argparse.Namespace) -> Optional[Tuple[int, ...]]:
    """This rank's NCCL as torch reports it (a tuple), or None: none, or --no-nccl."""
    if args.no_nccl:
        return None
    try:
        import torch
        version = torch.cuda.nccl.version()
    except Exception:               # a CPU build of torch has no NCCL to ask
        return None
    return tuple(version) if isinstance(version, tuple) else None


def _diagnostics(versions: Sequence[Optional[Tuple[int, ...]]]) -> Dict[str, Any]:
    """Whether NCCL's own diagnostics run: every rank has NCCL >= 2.31."""
    known = sorted({nccldiag.version_text(v) for v in versions})
    need = f"NCCL's diagnostics (NCCL_RUN_RAS_DIAGNOSTICS, NCCL_RUN_DIAGNOSTICS) need NCCL >= " \
           f"{'.'.join(map(str, nccldiag.MIN_VERSION))}"
    if all(nccldiag.version_ok(v) for v in versions):
        return {"run": True, "why": None, "nccl": known}
    return {"run": False, "why": f"{need}; this job's: {', '.join(known)}", "nccl": known}


def _not_run(diag: Dict[str, Any], why: str) -> Dict[str, Any]:
    """The diagnostics' state when the whole NCCL check does not run."""
    if not diag["run"]:
        return dict(diag, why=f"{diag['why']}; the NCCL check did not run either ({why})")
    return dict(diag, run=False, why=f"the NCCL check did not run ({why})")


def _cannot_check(session: Session, args: argparse.Namespace) -> Optional[str]:
    if args.no_nccl:
        return "--no-nccl"
    if faults.get("ncclcheck", session.rank) is not None:
        return None     # test switch: start the probe even without a GPU (it then fails)
    import torch
    import torch.distributed as dist
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (NCCL needs one)"
    if not dist.is_nccl_available():
        return f"this torch ({torch.__version__}) has no NCCL"
    return None

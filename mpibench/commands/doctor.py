"""mpibench doctor: every host's setup, the differences between hosts, findings with
advice, and (on GPUs) the transports NCCL really used between every pair of hosts."""
import datetime
import os
import shutil
import subprocess
import sys
import tempfile

from ..diagnose import findings, hostfacts, nccllog, ncclprobe
from ..errors import CheckFailed
from ..launch import bootstrap, faults
from ..results.output import open_output
from .common import guard, options

HELP = "check every host's setup: versions, GPUs, NCCL variables, NICs, RDMA; name what differs"
DESCRIPTION = (
    "Every rank collects its host's facts (versions, GPUs and driver, NCCL_/GLOO_/UCX_/"
    "OMPI_MCA_ variables, network interfaces, InfiniBand/RoCE ports, RDMA modules, "
    "nvidia-smi topo -m); rank 0 prints one report: per host, what differs between hosts, "
    "and findings with advice. On GPUs a short NCCL all_reduce with NCCL_DEBUG=INFO shows "
    "which transport each pair of hosts used.")
SESSION = None


def add_arguments(p):
    p.add_argument("--sys-root", default="/", metavar="PATH",
                   help="read /sys and /proc under PATH (default /); '{host}' in it becomes "
                        "each host's name (for fabricated trees)")
    p.add_argument("--no-nccl", action="store_true",
                   help="skip the NCCL transport check on GPUs")
    p.add_argument("--nccl-timeout", type=options.positive_float, default=120.0, metavar="SECONDS",
                   help="time allowed for the NCCL transport check (default 120)")
    p.add_argument("--json", metavar="PATH", help="write every fact and finding as JSON (never overwrites)")
    guard.add_timeout(p, "start-up, or gathering every host's facts; the NCCL check gets "
                         "--nccl-timeout more", 120.0)


def execute(session, args):
    out = open_output(session, "doctor", args)
    root = args.sys_root.replace("{host}", session.hostname)
    session.watch.arm("doctor: every host's facts")
    facts = hostfacts.collect(session, root)
    gathered = session.comm.gather(facts, root=0)
    guard.arm(session, args.timeout + args.nccl_timeout + 30,        # the probe's own limit, and more
              "doctor: the NCCL transport check")
    transports = nccl_check(session, args)
    session.watch.disarm()
    if session.rank != 0:
        return verdict(session, None)
    per_host, ranks = {}, {}
    for f in gathered:
        per_host.setdefault(f["host"], f)
        ranks.setdefault(f["host"], []).append(f["rank"])
    out.say(f"# mpibench doctor: {len(per_host)} host{'s' if len(per_host) != 1 else ''}, "
            f"{session.size} rank{'s' if session.size != 1 else ''}, launcher {session.launcher}")
    out.announce_files()
    for h, f in per_host.items():
        for line in host_lines(h, f, ranks[h]):
            out.say(line)
    diffs = _consistency(out, per_host)
    found = findings.version_findings(diffs) + findings.findings(per_host)
    pairs = _transports(session, out, transports)
    if pairs is not None:
        found += findings.transport_findings(pairs, per_host)
    errors = _findings(out, found)
    out.set(doctor={"hosts": {h: dict(f, ranks=ranks[h]) for h, f in per_host.items()},
                    "differences": [{"fact": label, "values": values} for label, values in diffs],
                    "findings": [{"host": f[0], "text": f[1], "severity": findings.severity(f)}
                                 for f in found],
                    "nccl_transports": None if pairs is None else
                    [{"hosts": list(k), "transports": v} for k, v in pairs.items()],
                    "nccl_check": {k: v for k, v in transports.items() if k != "logs"}})
    out.finish()
    return verdict(session, _failure(transports["errors"], errors))


def _consistency(out, per_host):
    """Rank 0: print the facts that differ between hosts; returns them."""
    diffs = findings.differences(per_host)
    out.say("#\n# consistency: " + (f"{len(diffs)} difference{'s' if len(diffs) != 1 else ''} "
                                    f"between hosts" if diffs else
                                    ("every compared fact is the same on every host"
                                     if len(per_host) > 1 else "one host, nothing to compare")))
    for label, values in diffs:
        out.say(f"#   DIFFERS {label}: " + ", ".join(f"{h}={_show(v)}" for h, v in values.items()))
    return diffs


def _transports(session, out, transports):
    """Rank 0: print the transports NCCL used between every pair of hosts (or why the check
    did not run); returns them by host pair (None when the check was skipped)."""
    out.say("#\n# NCCL transports (a short all_reduce with NCCL_DEBUG=INFO):")
    if transports["skipped"]:
        out.say(f"#   not checked: {transports['skipped']}")
        return None
    parsed = [nccllog.parse(text) for text in transports["logs"] if text]
    pairs = nccllog.by_host_pair(parsed, session.hosts)
    for (a, b), used in pairs.items():
        where = f"{a} (inside)" if a == b else f"{a} <-> {b}"
        out.say(f"#   {where}: {', '.join(used)}")
    if not pairs and not transports["errors"]:
        out.say("#   no connection between ranks in the logs" +
                (" (one rank: NCCL connects nothing)" if session.size == 1 else ""))
    for error in transports["errors"]:
        out.say(f"#   CHECK FAILED TO RUN: {error}")
    return pairs


def _findings(out, found):
    """Rank 0: print the findings and their count; returns how many are errors."""
    out.say("#\n# findings:" if found else "#\n# findings: none")
    for f in found:
        host, text = f
        mark = "ERROR " if findings.severity(f) == findings.ERROR else ""
        out.say(f"#   {host + ': ' if host else ''}{mark}{text}")
    errors = sum(findings.severity(f) == findings.ERROR for f in found)
    if found:
        out.say(f"#\n# {errors} problem{'s' if errors != 1 else ''} that break{'s' if errors == 1 else ''} "
                f"runs (ERROR), {len(found) - errors} warning{'s' if len(found) - errors != 1 else ''}"
                + ("; exit 1" if errors else ""))
    return errors


def _failure(not_run, errors):
    """Why doctor exits 1, or None: one of its own checks could not run (the report is then
    incomplete, whatever else it found), or it found problems that break runs."""
    if not_run:
        return (f"mpibench doctor: {len(not_run)} check{'s' if len(not_run) != 1 else ''} failed to "
                f"run, the report is incomplete; first: {not_run[0]}")
    if errors:
        return (f"doctor found {errors} problem{'s' if errors != 1 else ''} that "
                f"break{'s' if errors == 1 else ''} runs (ERROR above)")
    return None


def verdict(session, failure):
    """Every rank ends as rank 0 judged: exit 1 on a problem that breaks runs, else 0."""
    failure = session.comm.bcast(failure, root=0)
    if failure:
        raise CheckFailed(failure)
    return 0


def _show(value):
    return "(unset)" if value is None else str(value)


def host_lines(host, f, ranks):
    v = f["versions"]
    lines = [f"#\n# host {host} (rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))})",
             "#   versions    " + ", ".join(f"{k} {v.get(k) or '-'}" for k in findings.VERSION_KEYS)]
    cvd = f["cuda_visible_devices"]
    if f["gpus"]:
        models = sorted({g["name"] for g in f["gpus"]})
        gpu = f"{len(f['gpus'])} x {', '.join(models)}, driver {f['driver']}"
    else:
        gpu = "none" + (f" ({f['tool_errors'][0]})" if f["tool_errors"] else "")
    lines.append(f"#   GPUs        {gpu}; CUDA_VISIBLE_DEVICES {'unset' if cvd is None else cvd}")
    env = f["env"]
    lines.append("#   variables   " + (" ".join(f"{k}={val}" for k, val in env.items()) if env
                                      else "no NCCL_/GLOO_/UCX_/OMPI_MCA_ variables set"))
    nics = [f"{i['name']} {i['state']} {i['speed_mbps'] or '-'} Mb/s" for i in f["interfaces"]]
    lines.append("#   interfaces  " + (", ".join(nics) or f"none under {f['root']}sys/class/net"))
    ports = [f"{p['device']}/{p['port']} {p['state']} {p['rate'] or '-'} {p['link_layer']}"
             for p in f["rdma"]]
    mods = f["rdma_modules"]
    loaded = "unknown (/proc/modules unreadable)" if mods is None else ", ".join(mods) or "none loaded"
    lines.append("#   RDMA        " + (", ".join(ports) or "no devices") + "; modules " + loaded)
    if f["topology"]:
        lines.append("#   GPU topology (nvidia-smi topo -m):")
        lines += ["#     " + line for line in f["topology"].splitlines()]
    return lines


def nccl_check(session, args):
    """Every rank: a fresh process runs a short NCCL all_reduce with NCCL_DEBUG=INFO into
    its own log file. Returns {'skipped': why or None, 'logs': [text per rank] (rank 0),
    'errors': [why the check failed to run, per failing rank] (every rank)}."""
    result = {"skipped": None, "logs": [], "errors": []}
    reason = _cannot_check(session, args)
    reasons = session.comm.allgather(reason)
    bad = [(r, why) for r, why in enumerate(reasons) if why]
    if bad:
        r, why = bad[0]
        result["skipped"] = why if len(bad) == session.size else f"rank {r} ({session.hosts[r]}): {why}"
        return result
    planted = faults.get("ncclcheck", session.rank)     # test switch: the GPUs this rank sees
    gpus = None if planted is None else (planted.split("/") if planted else [f"gpu-{session.rank}"])
    device, why = bootstrap.gpu_index(session, os.environ, gpus)
    whys = [w for w in session.comm.allgather(why) if w]
    if whys:
        result["skipped"] = whys[0]
        return result
    # rank 0 serves the probes' rendezvous; each rank's probe process joins it
    store, addr, port = bootstrap.rank0_store(
        session, os.environ, datetime.timedelta(seconds=args.nccl_timeout), join=False)
    folder = tempfile.mkdtemp(prefix="mpibench-nccl-")
    log = os.path.join(folder, "nccl.log")
    env = dict(os.environ, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=log,
               MPIBENCH_PROBE=f"{addr} {port} {session.rank} {session.size} {device}",
               MPIBENCH_PROBE_TIMEOUT=str(args.nccl_timeout))
    error = None
    try:
        done = subprocess.run([sys.executable, "-m", ncclprobe.__name__], env=env,
                              capture_output=True, text=True, timeout=args.nccl_timeout + 30)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            error = (f"the NCCL check failed on rank {session.rank} ({session.hostname}), exit "
                     f"{done.returncode}: {tail}")
    except subprocess.TimeoutExpired:
        error = f"the NCCL check did not finish on rank {session.rank} ({session.hostname})"
    try:
        with open(log, errors="replace") as fh:
            text = fh.read()
    except OSError:
        text = ""
    shutil.rmtree(folder, ignore_errors=True)
    gathered = session.comm.gather(text, root=0)
    result["errors"] = [e for e in session.comm.allgather(error) if e]
    del store
    if session.rank == 0:
        result["logs"] = gathered
    return result


def _cannot_check(session, args):
    if args.no_nccl:
        return "--no-nccl"
    if faults.get("ncclcheck", session.rank) is not None:
        return None     # test switch: start the probe even without a GPU (it then fails)
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch (NCCL needs one)"
    if not dist.is_nccl_available():
        return f"this torch ({torch.__version__}) has no NCCL"
    return None

"""mpibench info: who is where — one row per rank, versions per host."""
from tabulate import tabulate

from ..diagnose import rankfacts
from ..results.numbers import counted
from .common import guard, options

HELP = "show every rank's host, device, backend and launcher, and versions per host"


def add_arguments(p):
    options.add_backend(p, options.AUTO_AND_TORCH_BACKENDS)
    guard.add_timeout(p, "start-up, or gathering every rank's record", 120.0)


def execute(session, args):
    record = dict(rankfacts.rank_record(session), backend=session.backend, launcher=session.launcher)
    session.watch.arm("info: gathering every rank's record")
    gathered = session.comm.gather((record, rankfacts.versions()), root=0)
    session.watch.disarm()
    if session.rank != 0:
        return 0
    rows = [[r["rank"], r["hostname"], r["pid"], r["local_rank"],
             r["device"] if r["device"] == "cpu" else f"{r['device']} {r['device_name']} [{r['bus_id']}]",
             r["backend"], r["launcher"]] for r, _ in gathered]
    session.out(f"# mpibench info: {counted(session.size, 'rank')} on "
                f"{counted(len(set(session.hosts)), 'host')}, backend {session.backend}, "
                f"launcher {session.launcher}, rendezvous {session.rendezvous}")
    session.out(tabulate(rows, headers=["rank", "host", "pid", "local rank", "device", "backend",
                                        "launcher"]))
    per_host = {}
    for r, v in gathered:
        per_host.setdefault(r["hostname"], v)
    session.out("")
    keys = ["python", "torch", "nccl", "mpi4py", "mpi"]
    session.out(tabulate([[h] + [v.get(k) or "-" for k in keys] for h, v in per_host.items()],
                         headers=["host"] + keys))
    for line in rankfacts.version_differences(per_host):
        session.out(line)
    return 0

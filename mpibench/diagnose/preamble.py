"""The part of every command's preamble that says where it ran: each rank's device, the
backend and launcher, versions per host (with differences), the network variables, and
the same facts in the results document (config.devices, versions, env, world)."""
from . import rankfacts


def gather(session):
    """(records, versions) of every rank on rank 0; (None, None) elsewhere."""
    records = session.comm.gather(rankfacts.rank_record(session), root=0)
    versions = session.comm.gather(rankfacts.versions(), root=0)
    return records, versions


def world(session, backends):
    """Where the job ran, as the results document records it."""
    return {"size": session.size, "hosts": list(dict.fromkeys(session.hosts)),
            "launcher": session.launcher, "backend": backends, "rendezvous": session.rendezvous,
            "barrier": session.comm.barrier_kind}


def rank_line(r):
    """nccl-tests 2.19.6's line for one rank (one group: mpibench runs one); the device is
    the CUDA ordinal, or cpu."""
    device = r["device"].split(":")[-1] if r["device"].startswith("cuda") else r["device"]
    return (f"#  Rank {r['rank']:2d} Group {0:2d} Pid {r['pid']:6d} on {r['hostname']:>10s} "
            f"device {device:>2s} [{r['bus_id'] or '-'}] {r['device_name']}")


def describe(session, out, backend_names, records, versions, config):
    """Rank 0: print the devices, backend, versions and env lines; record them in out."""
    out.say("#\n# Using devices")
    for r in records:
        out.say(rank_line(r))
    hosts = list(dict.fromkeys(session.hosts))
    backends = ", ".join(backend_names)
    out.say(f"# backend{'s' if len(backend_names) > 1 else ''} {backends}, launcher "
            f"{session.launcher}, {session.size} rank{'s' if session.size != 1 else ''} on "
            f"{len(hosts)} host{'s' if len(hosts) != 1 else ''}, rendezvous "
            f"{session.rendezvous or 'none (no torch process group)'}; timing barrier "
            f"{session.comm.barrier_kind}")
    per_host = {}
    for r, v in zip(records, versions):
        per_host.setdefault(r["hostname"], v)
    v0 = versions[0]
    out.say("# versions: " + ", ".join(f"{k} {v0[k]}" for k in v0 if v0[k]))
    for line in rankfacts.version_differences(per_host):
        out.say("# " + line)
    env = rankfacts.net_env()
    out.say("# env: " + (" ".join(f"{k}={v}" for k, v in env.items()) if env
                         else "no NCCL_/GLOO_/UCX_/OMPI_MCA_ variables set"))
    out.set(versions=per_host, env=env,
            world=world(session, backends),
            config={"devices": records, **config})

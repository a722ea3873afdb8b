"""Where a command ran, for its preamble and its results document: each rank's device, the
backend and launcher, versions per host, the network variables."""
from ..results import preamble as text
from . import rankfacts


def gather(session):
    """(records, versions) of every rank on rank 0; (None, None) elsewhere."""
    return (session.comm.gather(rankfacts.rank_record(session), root=0),
            session.comm.gather(rankfacts.versions(), root=0))


def world(session, backends):
    """Where the job ran, as the results document records it."""
    return {"size": session.size, "hosts": list(dict.fromkeys(session.hosts)),
            "launcher": session.launcher, "backend": backends, "rendezvous": session.rendezvous,
            "barrier": session.comm.barrier_kind}


def describe(session, out, backend_names, records, versions, config):
    """Rank 0: print the devices, backend, versions and env lines; record them in out."""
    per_host = {}
    for r, v in zip(records, versions):
        per_host.setdefault(r["hostname"], v)
    env, where = rankfacts.net_env(), world(session, ", ".join(backend_names))
    text.describe(out, records, where, len(backend_names), versions[0],
                  rankfacts.version_differences(per_host), env)
    out.set(versions=per_host, env=env, world=where, config={"devices": records, **config})

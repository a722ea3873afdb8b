"""mpibench check: a cluster acceptance test that names the hosts to drain."""
import argparse
import os
import time
from functools import partial
from itertools import count
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from ..diagnose import (checkjudge, fabricplan, health, hostfacts, pathlimits, rankfacts, tomography,
                        topology)
from ..diagnose.health import Retesting, Timed
from ..errors import UsageError
from ..launch import faults, rails as railbind
from ..launch.bootstrap import grouped
from ..launch.session import Session
from ..launch.slurm import compress_hostlist
from ..measure.backends.torchdist import TorchBackend
from ..measure.collectives import REGISTRY, traffic
from ..measure.collectives.alltoallv import AllToAllV
from ..measure.collectives.base import Call, Collective
from ..measure.dtypes import DTYPES
from ..measure.engine import Engine, Plan
from ..measure.groups import part_group
from ..measure.modes import MODE_KEYS
from ..measure.p2p import PairBench
from ..results import checktext, inputs, published, reader, rows, runtext
from ..results.output import RunOutput, open_output
from ..results.published import Entry
from .common import guard, options

HELP = "cluster acceptance test: per-host, pairwise and whole-job busbw; names the hosts to drain"
EXITS = "Exit 0 when every host and link passed, 1 when any failed, 2 on bad input."

# no root, every rank's load alike: symmetric (alltoallv's generated traffic, never a matrix)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "alltoallv")
GPU_SIZE = 1 << 30
CPU_SIZE = 16 << 20
DTYPE = DTYPES["float32"]
Limits = Dict[str, Dict[str, Any]]      # {test: {limit: value, 'source': text}}
Paths = Dict[str, Optional[Dict[str, Any]]]     # {host: its paths} (pathlimits.gather)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collectives", dest="collective", choices=COLLECTIVES, default="all_reduce",
                   metavar="NAME", help="the collective tests 1 and 3 measure, one of "
                   f"{', '.join(COLLECTIVES)} (default all_reduce)")
    p.add_argument("-b", "--size", type=options.size_arg, default=None, metavar="SIZE",
                   help="bytes per call, every test (default 1G on GPUs, 16M on CPUs)")
    p.add_argument("-n", "--iters", type=options.at_least(1), default=5,
                   help="timed calls per test (default 5)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=2,
                   help="untimed calls first (default 2)")
    p.add_argument("--expect", metavar="FILE",
                   help='JSON limits per test, e.g. {"intra": {"min_busbw_GBps": 400}, '
                        '"pair": {"min_busbw_GBps": 40, "max_latency_us": 30000}, '
                        '"job": {...}}; time per call in us. "published": the floors others '
                        'published for this platform (GPU model and count per host, hosts) and '
                        'collective, each naming its source')
    p.add_argument("--baseline", metavar="FILE",
                   help="an earlier check, run or nccl-tests result (printed output or -J JSON) "
                        "of the same collective, size and rank layout: fail below --min-share of it")
    options.add_min_share(p, "with --baseline: fail", "it", None, shown=f"{checkjudge.RELATIVE:g}")
    options.add_json(p, "every figure and verdict")
    p.add_argument("--csv", metavar="PATH", help="one line per host (never overwrites)")
    guard.add_timeout(p, "one test, or one round of host pairs", None,
                      "60 s plus the test's bytes at 1 GB/s; 300 s for the rendezvous")
    p.add_argument("--topology", metavar="FILE",
                   help="the switches in SLURM's topology.conf syntax (SwitchName=leaf1 "
                        "Nodes=n[01-16] / SwitchName=spine1 Switches=leaf[1-4]); under SLURM "
                        "without it, what `scontrol show topology` says")
    p.add_argument("--rails", metavar="IF0,IF1,...",
                   help=f"bind local rank i to interface i for gloo and the rendezvous "
                        f"(as {railbind.VAR}); one interface per local rank")
    options.add_backend(p, options.AUTO_AND_TORCH_BACKENDS)
    health.add_arguments(p)


def check_args(args: argparse.Namespace) -> None:
    health.check_args(args)
    if args.expect and args.baseline:
        raise UsageError("give --expect or --baseline, not both (--expect would win)")
    if args.min_share is not None and not args.baseline:
        raise UsageError(f"--min-share needs --baseline: it is the share of the baseline's figure "
                         f"below which check fails (without one, a host or pair fails below "
                         f"{checkjudge.RELATIVE:g} x the median)")
    args.min_share = args.min_share or checkjudge.RELATIVE
    if args.rails is not None:
        try:
            railbind.parse(args.rails)
        except ValueError as exc:
            raise UsageError(str(exc).replace(railbind.VAR, "--rails")) from None


def execute(session: Session, args: argparse.Namespace) -> int:
    from ..measure.backends.torchdist import TorchBackend
    backend = TorchBackend(session)
    coll = _configured(args.collective, session.size)
    size = args.size or (GPU_SIZE if backend.cuda else CPU_SIZE)
    members = grouped(session.hosts)            # {host: its ranks}, in host order
    names = list(members)
    ppn = _ranks_per_host(members)
    paths = pathlimits.gather(session)          # {host: its paths} on rank 0
    limits = _limits(session, args, coll, size, ppn, paths)
    if args.health:
        guard.arm(session, args.timeout or health.TIMEOUT, "check --health: start-up")
        return health.run(session, args, coll, size, members=members, limits=limits,
                          make_intra=lambda: _collective(session, backend, coll, size, session.size, None,
                                                         "inside the host", args.warmup),
                          retest=lambda intra, report: _intra_retest(session, args, intra,
                                                                     session.comm.barrier, report))
    fabric = _fabric(session, args, names, ppn)        # bad topology: exit 2 before any test
    out = open_output(session, "check", args)
    rates = session.comm.gather(hostfacts.line_rate(), root=0)
    records, versions = rankfacts.gather(session)
    guard.arm(session, args.timeout or float(round(60 + (args.warmup + args.iters) * 2 * size / 1e9)),
              "check: start-up")
    report = Report(session, out, args, coll, size, members=members, limits=limits, rates=rates or [],
                    records=records or [], versions=versions or [],
                    paths=paths) if session.rank == 0 else None
    # 1. inside each host, all hosts at once (one group per host, made in one collective)
    _inside_hosts(session, backend, args, coll, size, members, ppn, report)
    # 2. between hosts, in rounds of disjoint host pairs, every rail at once
    if len(names) > 1:
        _pair_rounds(session, backend, size, args, names, members, fabric, report)
    elif report:
        report.say(checktext.SKIPPED[2])
    # 3. the whole job, and once more when it missed its limit
    _whole_job(session, backend, args, coll, size, report)
    session.watch.disarm()
    return guard.verdict(session, report.finish() if report else None)


def _inside_hosts(session: Session, backend: TorchBackend, args: argparse.Namespace, coll: Collective,
                  size: int, members: Dict[str, List[int]], ppn: int, report: Optional["Report"]) -> None:
    """Test 1: a process group per host, every host at once; the hosts below their floor again."""
    session.watch.arm("check: a process group per host")
    mine = part_group(backend.dist, backend.device, members, session.rank) if ppn > 1 else None
    if mine is not None:
        intra = _collective(session, backend, coll, size, ppn, mine, "inside each host", args.warmup)
        gathered = session.comm.gather(intra(args, "inside each host"), root=0)
        if report:
            assert gathered is not None
            report.intra(gathered)
        _intra_retest(session, args, intra, partial(backend.dist.barrier, group=mine), report)
        del intra                     # its buffer, before the pair rounds allocate theirs
    elif report:
        report.say(checktext.SKIPPED[1])


def _whole_job(session: Session, backend: TorchBackend, args: argparse.Namespace, coll: Collective,
               size: int, report: Optional["Report"]) -> None:
    """Test 3: the whole job, and once more when it missed its limit."""
    job = _collective(session, backend, coll, size, session.size, None, "the whole job", args.warmup)
    gathered = session.comm.gather(job(args, "the whole job"), root=0)
    if report:
        assert gathered is not None
        report.job(gathered)
    if session.comm.bcast(bool(report and report.judge.job_failed), root=0):
        gathered = session.comm.gather(job(args, "the whole job, again"), root=0)
        if report:
            assert gathered is not None
            report.say_retest(3, [report.judge.job_retest(gathered)])


def _ranks_per_host(members: Dict[str, List[int]]) -> int:
    """The ranks every host has; UsageError when hosts have different counts."""
    by_count: Dict[int, List[str]] = {}
    for h, m in members.items():
        by_count.setdefault(len(m), []).append(h)
    if len(by_count) > 1:
        raise UsageError("hosts have different rank counts: " + ", ".join(
            f"{n} on {compress_hostlist(hs)}" for n, hs in sorted(by_count.items(), reverse=True))
            + "; check needs the same number on each")
    return next(iter(by_count))


def _limits(session: Session, args: argparse.Namespace, coll: Collective, size: int, ppn: int,
            paths: Paths) -> Limits:
    """{test: {limit: value, 'source': text}} from the --expect or --baseline file, read on
    rank 0 only (inputs.py), or --expect published's floors; {} = relative."""
    if args.expect == "published":
        return inputs.on_rank0(session, "published", lambda _: _published_floors(paths, coll.name, ppn))
    if args.expect:
        expect = inputs.on_rank0(session, args.expect, checkjudge.read_expect, "--expect")
        return {t: dict(v, source=f"--expect {args.expect}") for t, v in expect.items()}
    if not args.baseline:
        return {}
    # --collectives also names the collective of a printed baseline that does not name it
    baseline = inputs.on_rank0(session, args.baseline, lambda path: reader.load(path, coll.name),
                               "--baseline")
    aligned = {max(c.send, c.recv) * DTYPE.size for c in
               (coll.counts(size // DTYPE.size, DTYPE.size, n) for n in (ppn, session.size))}
    found, skipped = checkjudge.baseline_limits(baseline, args.baseline, collective=coll.name, size=size,
                                                ranks_per_host=ppn, world=session.size, share=args.min_share,
                                                sizes=aligned)
    src = f"{args.min_share:g} x --baseline {args.baseline}"
    return {t: dict(v, source=src) for t, v in found.items() if t != skipped}


def _published_floors(paths: Paths, collective: str, ppn: int) -> Limits:
    """--expect published: test 1's floor from one-host figures (with several ranks per host), the
    whole job's from figures of its host count; a health check's threshold where one matches,
    else the lowest figure. UsageError when none matches."""
    section = published.section(cast(Dict[str, Dict[str, Any]], paths), [collective])   # gather drops None
    plat, found = section["platform"], section["collectives"][collective]
    every = {"job": _floor(found)}
    if ppn > 1:
        every["intra"] = _floor(published.match(published.load(), dict(plat, hosts=1), collective))
    floors = {t: f for t, f in every.items() if f}
    if not floors:
        raise UsageError(f"--expect published: nothing published matches {published.platform_text(plat)}, "
                         f"{collective}; give --expect FILE with your own floors")
    return floors


def _floor(found: List[Entry]) -> Optional[Dict[str, Any]]:
    """A health check's threshold where one is among the figures, else the lowest figure."""
    return published.floor([e for e in found if e["kind"] == "threshold"] or found)


def _intra_retest(session: Session, args: argparse.Namespace, intra: Timed, barrier: Call,
                  report: Optional[Retesting]) -> None:
    """Test 1 again for the hosts below their floor, in the judge's rounds of steps: a step's
    hosts time their collective (intra, their barrier) while the others wait without spinning."""
    k = 0
    while steps := session.comm.bcast(report.judge.intra_retests() if report else None, root=0):
        if k:
            session.watch.arm("check: a pause between retests inside the host")
            time.sleep(checkjudge.PAUSE)
        found = []
        for hosts in steps:         # one after another
            mine = session.hosts[session.rank] in hosts
            session.watch.arm(f"check: {'' if mine else 'waiting while '}{', '.join(hosts)} "
                              f"measured again inside the host")
            t = intra(args, "again inside " + ", ".join(hosts), barrier) if mine else None
            session.comm.polite_barrier()
            found.append(session.comm.gather(t, root=0))
        if report:
            report.say_retest(1, report.judge.intra_retest(steps, [f or [] for f in found]))
        k += 1


def _configured(name: str, n: int) -> Collective:
    """The collective; alltoallv with its generated traffic at NCCL_TESTS_ALLTOALLV_SPREAD
    (default 1.0): a matrix would load ranks unequally, and hosts could not be compared."""
    if name != "alltoallv":
        return REGISTRY[name]
    try:
        return AllToAllV(traffic.from_settings(None, None, None, None, n))
    except traffic.BadMatrix as exc:
        raise UsageError(str(exc)) from None


def _collective(session: Session, backend: TorchBackend, coll: Collective, size: int, n: int, group: Any,
                where: str, warmup: int) -> Timed:
    """timed(args, where, barrier=None): coll among n ranks (group None: all) through the engine on
    a buffer allocated now; with its group's barrier, that group alone (a retest while others wait)."""
    session.watch.arm(f"check: {coll.name} {where}")
    # the sweep's default -z, as nccl-tests'; check's -w
    engine = Engine(session, backend, Plan([coll], [size], [DTYPE], ["sum"], warmup=warmup,
                                           blocking=backend.default_blocking()), None)
    call, c, mode = engine.group_call(coll, DTYPE, size // DTYPE.size, n, group)
    calls = count()                 # test-only: slowonce stretches the first measurement alone

    def timed(args: argparse.Namespace, where: str, barrier: Optional[Call] = None) -> Dict[str, Any]:
        session.watch.arm(f"check: {coll.name} {where}")
        seconds, each = engine.time_calls(call, args.iters, barrier)
        assert each is not None     # per_iter: each call's seconds
        slow = faults.slowdown(session.rank, "job" if group is None else "intra", next(calls) == 0)
        return {"host": session.hostname, "seconds": seconds * slow,
                "times": [t * slow for t in each], "bw_bytes": coll.bw_bytes(c, DTYPE.size, n),
                "factor": coll.busbw_factor(n), "count": c.param,
                "size": max(c.send, c.recv) * DTYPE.size, "mode": MODE_KEYS[mode]}
    return timed


def _fabric(session: Session, args: argparse.Namespace, names: List[str], ppn: int
            ) -> Optional[tomography.Fabric]:
    """Rank 0's tomography.Fabric (None elsewhere): a rail per local rank, named by its bound
    interface, under the switches of --topology FILE, else SLURM's, else one switch."""
    rails = session.comm.gather(session.rail, root=0)
    if args.topology:
        topo = inputs.on_rank0(session, args.topology, lambda path: _tree(
            topology.read_file(path), path, names, True), "--topology")
    elif os.environ.get("SLURM_JOB_ID"):
        source = "scontrol show topology"
        topo = inputs.on_rank0(session, source, lambda _: _tree(
            topology.from_slurm(), source, names, False))
    else:
        topo = topology.single(names)
    if session.rank != 0:
        return None
    assert rails is not None
    index = {h: i for i, h in enumerate(names)}
    nics = {(index[session.hosts[r]], rail[0]): rail[1] for r, rail in enumerate(rails) if rail}
    return tomography.Fabric(names, ppn, topo, nics)


def _tree(text: Optional[str], source: str, names: List[str], strict: bool) -> topology.Topology:
    """The job's hosts under the switches that text describes (no text: one switch)."""
    return topology.build(topology.parse(text, source), names, source, strict) if text \
        else topology.single(names)


def _pair_rounds(session: Session, backend: TorchBackend, size: int, args: argparse.Namespace,
                 names: List[str], members: Dict[str, List[int]], fabric: Optional[tomography.Fabric],
                 report: Optional["Report"]) -> None:
    """The rounds: rank 0 plans host pairs (fabricplan), every local rank i of a pair's
    hosts exchanges with its rank i, every pair and rail at once; counters are read on
    each host's first rank before and after each round."""
    bench = PairBench(session, backend, size, iters=args.iters, warmup=args.warmup,
                      bidirectional=True)
    session.agree(bench.allocate(True), 1)
    rounds = fabricplan.FabricRounds(fabric) if report and fabric else None
    reader_rank = session.local_rank == 0
    calls = count()                 # test-only: slowonce stretches the first round's times alone
    while todo := session.comm.bcast(rounds.next_round() if rounds else None, root=0):
        ranks = [(members[names[a]][i], members[names[b]][i])
                 for a, b in todo for i in range(len(members[names[a]]))]
        session.watch.arm(f"check: round of {len(todo)} host pairs x {len(ranks) // len(todo)} rails")
        before = hostfacts.snapshot() if reader_rank else None
        start = time.perf_counter()
        records = bench.run_round(ranks, with_latency=False)
        seconds = time.perf_counter() - start
        slow = faults.slowdown(session.rank, "pair", next(calls) == 0) if records else 1.0
        for rec in records:
            rec["times"] = [t * slow for t in rec["times"]]
        gathered = session.comm.gather((records, _moved(session, before)), root=0)
        if report:
            assert rounds is not None and gathered is not None
            rounds.record(report.pair_round(todo, [g[0] for g in gathered], seconds,
                                            {session.hosts[r]: g[1] for r, g in enumerate(gathered)
                                             if g[1] is not None}))
    bench.send_buf = bench.recv_buf = None
    if report:
        assert rounds is not None and fabric is not None
        report.judge.pair_verdict(rounds.verdict(), fabric)


def _moved(session: Session, before: Optional[Dict[str, Dict[str, Any]]]) -> Optional[List[Dict[str, Any]]]:
    """What this host's counters did since before (read on its first rank; None elsewhere)."""
    moved = hostfacts.delta(before, hostfacts.snapshot()) if before is not None else None
    fault = faults.get("counter", session.rank)
    if fault is not None and moved is not None:     # test-only: a counter that moved
        moved.append({"port": session.rail[1] if session.rail else "eth0",
                      "what": fault or "symbol_error", "moved": 1})
    return moved


class Report:
    """Rank 0: the figures as they come, judged (checkjudge), printed (checktext) and written."""

    def __init__(self, session: Session, out: Optional[RunOutput], args: argparse.Namespace,
                 coll: Collective, size: int, *, members: Dict[str, List[int]], limits: Limits,
                 rates: List[Optional[float]], records: List[Dict[str, Any]],
                 versions: List[Dict[str, Optional[str]]], paths: Paths) -> None:
        """The judge (members: {host: its ranks}, in host order; limits: _limits'; rates: each
        rank's host's line rate), and the header: the test, the job, the thresholds, the files."""
        assert out is not None and session.backend is not None      # rank 0's, with a process group
        self.s, self.out, self.say, self.coll = session, out, out.say, coll
        self.names = list(members)
        self.ppn = len(members[self.names[0]])
        config = {"collective": coll.name, "size": size, "ranks_per_host": self.ppn,
                  "world": session.size, "hosts": self.names, "iters": args.iters,
                  "warmup": args.warmup}
        self.judge = checkjudge.Judge(config, members, limits,
                                        {session.hosts[r]: rate for r, rate in enumerate(rates)})
        self.say(checktext.header_line(coll.name, size, len(self.names), self.ppn, args.iters,
                                       args.warmup))
        rankfacts.describe(session, out, [session.backend], records, versions,
                         {"size": size, "iters": args.iters, "warmup": args.warmup})
        self.paths = pathlimits.section(paths, len(paths) > 1)
        pub = published.section(cast(Dict[str, Dict[str, Any]], paths), [coll.name])    # gather drops None
        runtext.path_header(out, self.paths, pub)
        self.say(*("# " + x for x in published.lines(pub["collectives"][coll.name], pub["platform"],
                                                     coll.name)))
        self.say(*checktext.threshold_lines(checkjudge.TESTS, limits, self.ppn, checkjudge.RELATIVE))
        out.announce_files()
        out.set(check=self.judge.doc)     # the judge's figures are the check section

    def intra(self, gathered: List[Dict[str, Any]]) -> None:
        busbws = self.judge.intra(gathered)
        self.say(checktext.intra_line(self.coll.name, self.ppn, cast(List[float], busbws),
                                      self.judge.suspects))
        self.out.set()

    def say_retest(self, test: int, lines: Sequence[str]) -> None:
        self.say(*checktext.retest_lines(test, lines))
        self.out.set()

    def pair_round(self, todo: List[Tuple[int, int]], records: List[List[Dict[str, Any]]], seconds: float,
                   moved: Dict[str, List[Dict[str, Any]]]) -> Dict[Tuple[int, int], List[bool]]:
        """One round's host pairs, judged and printed; {(a, b): [passed per rail]} over host
        indices. moved: {host: counter changes during the round}."""
        result, figs = self.judge.pair_round(todo, records, seconds, moved)
        rate = {h: e["line_rate_gbps"] for h, e in self.judge.hosts.items()}
        pairs = []
        for (a, b), per in figs.items():
            ha, hb = self.names[a], self.names[b]
            bad = [i for i, ok in enumerate(result[(a, b)]) if not ok]
            pairs.append((ha, hb, per, bad, checktext.pair_rate(rate[ha], rate[hb])))
        self.say(checktext.round_line(len(self.judge.doc["rounds"]), pairs, self.ppn, seconds))
        self.out.set()
        return result

    def job(self, gathered: List[Dict[str, Any]]) -> None:
        fig, rec = self.judge.job(gathered), gathered[0]
        line = checktext.job_line(self.coll.name, self.s.size, fig, self.judge.job_failed)
        self.out.add_row(rows.one_mode(
            self.coll.name, rec["mode"], [r["seconds"] for r in gathered], backend=self.s.backend or "",
            dtype=DTYPE, size=rec["size"], count=rec["count"], redop="sum", bw_bytes=rec["bw_bytes"],
            factor=rec["factor"]), line)

    def finish(self) -> Optional[str]:
        """Print the verdicts; the failure message, or None when everything passed."""
        doc = self.judge.doc
        links = self.judge.path_findings(self.paths["findings"])
        self.say(*checktext.host_table(doc["hosts"]))
        failing, hostlist = self.judge.failing()
        self.say(*checktext.verdict_lines(len(self.names), self.judge.counter_warnings() + links,
                                          doc.get("transient", []), failing, hostlist,
                                          doc.get("suspects", [])))
        self.out.set()
        self.out.finish()
        return self.judge.failure()

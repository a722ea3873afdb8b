"""mpibench check: a cluster acceptance test that names the hosts to drain."""
import csv
import io
import math
import time
from functools import partial
from statistics import median

from tabulate import tabulate

from ..diagnose import health, jobinfo, pairs
from ..diagnose.health import line_rate
from ..errors import CheckFailed, UsageError
from ..launch.slurm import compress_hostlist
from ..launch.watchdog import TIMED_LOOP
from ..measure.collectives import REGISTRY
from ..measure.collectives.base import Ctx, algbw, busbw
from ..measure.dtypes import DTYPES
from ..measure.engine import iteration_views, warm_up
from ..measure.modes import MODE_KEYS
from ..measure.p2p import PairBench
from ..measure.sizes import format_size
from ..results import inputs, reader, rows
from ..results.output import open_output
from ..results.summary import share_text
from .common import classic, guard, options

HELP = "cluster acceptance test: per-host, pairwise and whole-job busbw; names the hosts to drain"
DESCRIPTION = (
    "Three tests. 1. Inside each host, all hosts at once: the collective among the ranks "
    "of one host, busbw per host. 2. Between hosts, in two or three rounds whatever the "
    "host count: one rank per host, hosts in disjoint pairs, every pair at once, both "
    "directions at once (nccl-tests' sendrecv between two ranks: busbw = size / time); a "
    "pair below the threshold makes both hosts suspects, each suspect is paired again with "
    "a host that passed; a host that fails with every partner fails, a pair that failed "
    "only together is a suspect link. 3. The collective over every rank. Thresholds: "
    "--expect FILE, else --baseline FILE (x --min), else relative (below 0.8 of the median "
    "host or pair). Exit 0 when every host and link passed, 1 when any failed, 2 on bad input.")
SESSION = "args"

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")   # no root: symmetric
GPU_SIZE = 1 << 30
CPU_SIZE = 16 << 20
DTYPE = DTYPES["float32"]


def add_arguments(p):
    p.add_argument("--collective", choices=COLLECTIVES, default="all_reduce",
                   help="the collective of tests 1 and 3 (default all_reduce)")
    p.add_argument("-b", "--size", type=options.size_arg, default=None, metavar="SIZE",
                   help="bytes per call, every test (default 1G on GPUs, 16M on CPUs)")
    p.add_argument("-n", "--iters", type=options.int_at_least(1), default=5,
                   help="timed calls per test (default 5)")
    p.add_argument("-w", "--warmup", type=options.int_at_least(0), default=2,
                   help="untimed calls first (default 2)")
    p.add_argument("--expect", metavar="FILE",
                   help='JSON limits per test, e.g. {"intra": {"min_busbw_GBps": 400}, '
                        '"pair": {"min_busbw_GBps": 40, "max_latency_us": 30000}, '
                        '"job": {...}}; time per call in us')
    p.add_argument("--baseline", metavar="FILE",
                   help="an earlier check, run or nccl-tests result (printed output or -J JSON) "
                        "of the same collective, size and rank layout: fail below --min of it")
    p.add_argument("--min", type=options.positive_float, default=health.RELATIVE, metavar="F",
                   dest="min_share", help="with --baseline: fail below F times it (default 0.8)")
    p.add_argument("--json", metavar="PATH", help="write every figure and verdict (never overwrites)")
    p.add_argument("--csv", metavar="PATH", help="one line per host (never overwrites)")
    guard.add_timeout(p, "one test, or one round of host pairs", None,
                      "60 s plus the test's bytes at 1 GB/s; 300 s for the rendezvous")
    options.add_backend(p, options.TORCH_BACKENDS)


def check_args(args):
    if args.expect and args.baseline:
        raise UsageError("give --expect or --baseline, not both (--expect would win)")


def read_inputs(session, args):
    """--expect and --baseline, read on rank 0 only (a path the other hosts may not see)."""
    args.limits = inputs.on_rank0(session, args.expect, health.read_expect, "--expect") \
        if args.expect else None
    args.baseline_doc = inputs.on_rank0(session, args.baseline, reader.load, "--baseline") \
        if args.baseline else None


def execute(session, args):
    from ..measure.backends.torchdist import TorchBackend
    read_inputs(session, args)
    backend = TorchBackend(session)
    coll = REGISTRY[args.collective]
    size = args.size or (GPU_SIZE if backend.cuda else CPU_SIZE)
    names = list(dict.fromkeys(session.hosts))
    members = {h: [r for r, x in enumerate(session.hosts) if x == h] for h in names}
    counts = {h: len(m) for h, m in members.items()}
    if len(set(counts.values())) > 1:
        by_count = {}
        for h, n in counts.items():
            by_count.setdefault(n, []).append(h)
        raise UsageError("hosts have different rank counts: " + ", ".join(
            f"{n} on {compress_hostlist(hs)}" for n, hs in sorted(by_count.items(), reverse=True))
            + "; check needs the same number on each")
    ppn = counts[names[0]]
    limits = _limits(args, size, ppn, session.size)
    out = open_output(session, "check", args)
    rates = session.comm.gather(line_rate(), root=0)
    records, versions = jobinfo.gather(session)
    guard.arm(session, args.timeout or float(round(60 + (args.warmup + args.iters) * 2 * size / 1e9)),
              "check: start-up")
    report = Report(session, out, args, coll, size, ppn, names, members, limits, rates) \
        if session.rank == 0 else None
    if report:
        report.header(records, versions)
        if out.files and args.csv:
            next(f for f in out.files if f.requested == args.csv).render = report.csv
    # 1. inside each host, all hosts at once (every rank creates every group, in order)
    session.watch.arm("check: a process group per host")
    groups = [backend.dist.new_group(members[h]) for h in names] if ppn > 1 else []
    if groups:
        mine = groups[names.index(session.hosts[session.rank])]
        t = _collective_time(session, backend, coll, size, ppn, args, mine, "inside each host")
        gathered = session.comm.gather(t, root=0)
        if report:
            report.intra(gathered)
    elif report:
        report.say("# 1. inside each host: skipped, one rank per host")
    # 2. between hosts, in rounds of disjoint pairs
    leaders = pairs.participants(session.hosts)
    if len(leaders) > 1:
        _pair_rounds(session, backend, size, args, leaders, report)
    elif report:
        report.say("# 2. between hosts: skipped, the job has one host")
    # 3. the whole job
    t = _collective_time(session, backend, coll, size, session.size, args, None, "the whole job")
    gathered = session.comm.gather(t, root=0)
    session.watch.disarm()
    failed = None
    if report:
        report.job(gathered)
        failed = report.finish()
    failed = session.comm.bcast(failed, root=0)
    if failed:
        raise CheckFailed(failed)
    return 0


def _limits(args, size, ppn, world):
    """{test: {limit: value, 'source': text}} from --expect or --baseline; {} = relative."""
    if args.limits:
        return {t: dict(v, source=f"--expect {args.expect}") for t, v in args.limits.items()}
    if args.baseline_doc is None:
        return {}
    coll = REGISTRY[args.collective]
    aligned = {max(c.send, c.recv) * DTYPE.size for c in
               (coll.counts(size // DTYPE.size, DTYPE.size, n) for n in (ppn, world))}
    found, skipped = health.baseline_limits(args.baseline_doc, args.baseline, args.collective,
                                            size, ppn, world, args.min_share, aligned)
    src = f"{args.min_share:g} x --baseline {args.baseline}"
    out = {t: dict(v, source=src) for t, v in found.items() if t != skipped}
    return out


def _collective_time(session, backend, coll, size, n, args, group, where):
    """Seconds per call of coll among n ranks (group None: all), every rank of a group timing
    the same loop; every rank of the job takes part (each in its own group)."""
    session.watch.arm(f"check: {coll.name} {where}")
    count = size // DTYPE.size
    c = coll.counts(count, DTYPE.size, n)
    mode = "in" if "in" in backend.modes(coll) else "out"     # in place needs one buffer
    elements = max(c.send, c.recv) if mode == "in" else c.send + c.recv
    buf = classic.tensor(session, backend, DTYPE, elements)
    send, recv = iteration_views(buf[c.recv:], buf, c, mode, session.rank, 1)[0]
    ctx = Ctx(rank=session.rank, n=n, root=-1, op="sum", dtype=DTYPE, count=c.param,
              in_place=mode == "in", backend_op=backend.ops["sum"], device=backend.device)
    z = backend.default_blocking()        # the sweep's default -z, as nccl-tests'
    call = backend.bind(coll, send, recv, ctx, backend.launches_async(z))
    if group is not None:
        call = partial(call, group=group)
    barrier = session.comm.barrier
    warm_up(backend, session.watch, [call] * max(1, args.warmup), args.warmup, z, barrier)
    calls = [call] * args.iters
    session.watch.mark(TIMED_LOOP)
    seconds = backend.time_loop(calls, z, barrier)
    session.watch.mark("gathering the times")
    return {"host": session.hostname, "seconds": seconds,
            "bw_bytes": coll.bw_bytes(c, DTYPE.size, n), "factor": coll.busbw_factor(n),
            "count": c.param, "size": max(c.send, c.recv) * DTYPE.size, "mode": MODE_KEYS[mode]}


def _pair_rounds(session, backend, size, args, leaders, report):
    bench = PairBench(session, backend, size, 1, args.iters, args.warmup, 1, True)
    session.agree(bench.allocate(session.rank in leaders), 1)
    rounds = health.PairRounds(len(leaders)) if report else None
    while True:
        todo = rounds.next_round() if rounds else None
        todo = session.comm.bcast(None if todo is None else
                                  [(leaders[a], leaders[b]) for a, b in todo], root=0)
        if not todo:
            break
        session.watch.arm(f"check: round of {len(todo)} host pairs")
        start = time.perf_counter()
        records = session.comm.gather(bench.run_round(todo, with_latency=False), root=0)
        if report:
            rounds.record(report.pair_round(todo, records, leaders, time.perf_counter() - start))
    bench.send_buf = bench.recv_buf = None
    if report:
        report.pair_verdict(rounds.verdict(), leaders)


class Report:
    """Rank 0: the figures as they come, the thresholds, the verdicts, the files."""

    def __init__(self, session, out, args, coll, size, ppn, names, members, limits, rates):
        self.s, self.out, self.args, self.coll = session, out, args, coll
        self.size, self.ppn, self.names, self.members = size, ppn, names, members
        self.limits = limits
        self.rate = {session.hosts[r]: rate for r, rate in enumerate(rates)}
        self.hosts = {h: {"host": h, "ranks": members[h], "line_rate_gbps": self.rate[h],
                          "intra": None, "pairs": [], "verdict": "PASS", "reasons": []}
                      for h in names}
        self.figures = {"intra": [], "pair": [], "job": []}
        self.doc = {"config": {"collective": coll.name, "size": size, "ranks_per_host": ppn,
                               "world": session.size, "hosts": names, "iters": args.iters,
                               "warmup": args.warmup,
                               "thresholds": {t: limits.get(t) for t in health.TESTS}},
                    "hosts": list(self.hosts.values()), "rounds": [], "suspect_links": [],
                    "figures": self.figures}
        self.pair_limit = limits.get("pair")
        self.job_failed = None

    def say(self, text):
        self.out.say(text)

    def save(self):
        self.out.set(check=self.doc)

    def header(self, records, versions):
        n = len(self.names)
        self.say(f"# mpibench check: {self.coll.name} at {format_size(self.size)}, "
                 f"{n} host{'s' if n != 1 else ''} x {self.ppn} rank{'s' if self.ppn != 1 else ''}, "
                 f"{self.args.iters} timed calls after {self.args.warmup} warm-up per test")
        jobinfo.describe(self.s, self.out, [self.s.backend], records, versions,
                         {"size": self.size, "iters": self.args.iters, "warmup": self.args.warmup})
        for test in health.TESTS:
            lim = self.limits.get(test)
            self.say(f"# threshold {test}: " + (_limit_text(lim) if lim else (f"relative: below {health.RELATIVE:g} of the median "
                             + ("pair" if test == "pair" else "host")
                             if test != "job" else "none (give --expect or --baseline to judge it)")))
        self.out.announce_files()
        self.save()

    def _figure(self, rec):
        alg = algbw(rec["bw_bytes"], rec["seconds"])
        return {"time_us": rec["seconds"] * 1e6, "algbw_GBps": alg, "busbw_GBps": busbw(alg, rec["factor"])}

    def intra(self, gathered):
        per_host = {}
        for rec in gathered:
            per_host.setdefault(rec["host"], []).append(rec)
        for h, recs in per_host.items():
            mean = dict(recs[0], seconds=sum(r["seconds"] for r in recs) / len(recs))
            self.hosts[h]["intra"] = self._figure(mean)
        self.figures["intra"] = [self.hosts[h]["intra"]["busbw_GBps"] for h in self.names]
        lim = self.limits.get("intra") or {"min_busbw_GBps": health.relative(self.figures["intra"]),
                                           "source": f"{health.RELATIVE:g} x the median host"}
        self.doc["config"]["thresholds"]["intra"] = lim
        for h in self.names:
            why = health.below(self.hosts[h]["intra"], lim)
            if why:
                self._fail(h, f"inside the host: {why}")
        self.say(f"# 1. inside each host: {self.coll.name} among its {self.ppn} ranks, all hosts "
                 f"at once; median busbw {median(self.figures['intra']):.3f} GB/s")
        self.save()

    def pair_round(self, todo, records, leaders, seconds):
        """One round's pairs: figures, judged; returns {(i, j): passed} over host indices."""
        ends = {}
        for recs in records:
            for rec in recs:
                ends.setdefault(tuple(sorted((rec["from"], rec["to"]))), []).append(rec["times"])
        figs = {}
        for a, b in todo:
            per_iter = [max(ts) for ts in zip(*ends[(a, b)])]
            t = median(per_iter)
            figs[(a, b)] = {"time_us": t * 1e6, "algbw_GBps": algbw(self.size, t),
                            "busbw_GBps": algbw(self.size, t)}
        k = len(self.doc["rounds"]) + 1
        if self.pair_limit is None:       # relative: the first round sets the reference
            self.pair_limit = {"min_busbw_GBps": health.relative(
                [f["busbw_GBps"] for f in figs.values()]),
                "source": f"{health.RELATIVE:g} x the median pair"}
            self.doc["config"]["thresholds"]["pair"] = self.pair_limit
        index = {r: i for i, r in enumerate(leaders)}
        result, lines = {}, []
        for (a, b), f in figs.items():
            why = health.below(f, self.pair_limit)
            ha, hb = self.s.hosts[a], self.s.hosts[b]
            rate = self._pair_rate(ha, hb)
            for me, other in ((ha, hb), (hb, ha)):
                self.hosts[me]["pairs"].append({"partner": other, "round": k, **f,
                                                "passed": why is None, "why": why})
            self.figures["pair"].append(f["busbw_GBps"])
            result[(index[a], index[b])] = why is None
            lines.append(f"{ha}-{hb} {f['busbw_GBps']:.3f}{share_text(f['busbw_GBps'], rate)}"
                         + ("" if why is None else " FAIL"))
        self.doc["rounds"].append([[self.s.hosts[a], self.s.hosts[b]] for a, b in todo])
        self.doc.setdefault("round_seconds", []).append(seconds)
        self.say(f"# 2. between hosts, round {k}: {len(todo)} pair{'s' if len(todo) != 1 else ''} "
                 f"at once, busbw GB/s: " + ", ".join(lines[:8])
                 + (f", ... ({len(lines) - 8} more)" if len(lines) > 8 else "")
                 + f" ({seconds:.2f} s)")
        self.save()
        return result

    def pair_verdict(self, verdict, leaders):
        host_of = [self.s.hosts[r] for r in leaders]
        for h in verdict["bad"]:
            proven, _ = verdict["reasons"][h]
            failed = [p for p in self.hosts[host_of[h]]["pairs"] if not p["passed"]]
            timed = "max_latency_us" in self.pair_limit
            self._fail(host_of[h], f"between hosts: below {_limit_text(self.pair_limit)} with "
                       + ", ".join(f"{p['partner']} ({_bw(p['busbw_GBps'])} GB/s"
                                   + (f", {p['time_us']:.0f} us)" if timed else ")") for p in failed)
                       + (f"; {len(proven)} of {len(failed)} passed with other hosts" if proven
                          else "; none passed with another host to compare"))
        self.doc["suspect_links"] = [[host_of[a], host_of[b]] for a, b in verdict["links"]]
        self.doc["pair_rounds"] = verdict["rounds"]

    def job(self, gathered):
        mean = dict(gathered[0], seconds=sum(r["seconds"] for r in gathered) / len(gathered))
        fig = self._figure(mean)
        self.doc["job"] = fig
        self.figures["job"] = [fig["busbw_GBps"]] if fig["busbw_GBps"] else []
        lim = self.limits.get("job")
        self.job_failed = health.below(fig, lim)
        n = self.s.size
        line = (f"# 3. the whole job: {self.coll.name} over {n} rank{'s' if n != 1 else ''}, "
                + (f"busbw {fig['busbw_GBps']:.3f} GB/s" if fig["busbw_GBps"] is not None
                   else "busbw n/a (not defined for one rank)")
                + f", {fig['time_us']:.1f} us per call"
                + (f": FAIL, {self.job_failed}" if self.job_failed else ""))
        self.out.add_row(rows.one_mode(
            self.coll.name, self.s.backend, DTYPE, mean["size"], mean["count"], "sum", -1,
            mean["bw_bytes"], mean["factor"], mean["mode"], [r["seconds"] for r in gathered]),
            line)

    def _pair_rate(self, a, b):
        """The slower known line rate of two hosts (None when neither reports one)."""
        return min((x for x in (self.rate[a], self.rate[b]) if x), default=None)

    def _fail(self, host, reason):
        self.hosts[host]["verdict"] = "FAIL"
        self.hosts[host]["reasons"].append(reason)

    def table(self):
        rows = []
        for h in self.names:
            e = self.hosts[h]
            intra = "-" if e["intra"] is None else _bw(e["intra"]["busbw_GBps"])
            partners = ", ".join(
                f"{p['partner']} {_bw(p['busbw_GBps'])}"
                f"{share_text(p['busbw_GBps'], self._pair_rate(h, p['partner']))}"
                for p in e["pairs"]) or "-"
            rows.append([h, len(e["ranks"]), intra, partners, e["verdict"],
                         "; ".join(e["reasons"]) or "-"])
        self.say("#")
        for line in tabulate(rows, headers=["host", "ranks", "intra busbw", "busbw with each partner "
                                            "(% of line rate)", "verdict", "reason"],
                             disable_numparse=True).splitlines():
            self.say("#  " + line)

    def finish(self):
        """Print the verdicts; the failure message, or None when everything passed."""
        self.table()
        failing = [h for h in self.names if self.hosts[h]["verdict"] == "FAIL"]
        links = self.doc["suspect_links"]
        hostlist = compress_hostlist(failing)
        self.doc.update(failing_hosts=failing, hostlist=hostlist)
        self.say("#")
        for a, b in links:
            self.say(f"# SUSPECT LINK {a} - {b}: below the threshold together, both passed "
                     f"with other hosts")
        if failing:
            self.say(f"# FAILING HOSTS ({len(failing)} of {len(self.names)}): {hostlist}")
            self.say(f'scontrol update NodeName={hostlist} State=DRAIN Reason="mpibench check failed"')
        else:
            self.say(f"# every host passed ({len(self.names)})")
        self.save()
        self.out.finish()
        problems = ([f"{len(failing)} host{'s' if len(failing) != 1 else ''} failed: {hostlist}"]
                    if failing else []) + \
            ([f"{len(links)} suspect link{'s' if len(links) != 1 else ''}"] if links else []) + \
            ([f"the whole job: {self.job_failed}"] if self.job_failed else [])
        return "check FAILED: " + "; ".join(problems) if problems else None

    def csv(self, doc):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["host", "ranks", "intra_busbw_GBps", "partner", "round", "pair_busbw_GBps",
                    "line_rate_gbps", "verdict", "reason"])
        for e in (doc.get("check") or {}).get("hosts", []):
            intra = "" if e["intra"] is None else e["intra"]["busbw_GBps"]
            for p in e["pairs"] or [None]:
                w.writerow([e["host"], len(e["ranks"]), intra, p["partner"] if p else "",
                            p["round"] if p else "", p["busbw_GBps"] if p else "",
                            e["line_rate_gbps"] or "", e["verdict"], "; ".join(e["reasons"])])
        return buf.getvalue()


def _limit_text(lim):
    """'min_busbw_GBps 40 (--expect FILE)': a test's limits and where they come from."""
    return ", ".join(f"{k} {v:.4g}" for k, v in lim.items() if k != "source") + f" ({lim['source']})"


def _bw(value):
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

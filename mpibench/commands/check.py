"""mpibench check: a cluster acceptance test that names the hosts to drain."""
import csv
import io
import math
import os
import time
from functools import partial
from statistics import median

from tabulate import tabulate

from ..diagnose import counters, fabricplan, jobinfo, limits as thresholds, pairs, tomography, topology
from ..diagnose.hostfacts import line_rate
from ..errors import CheckFailed, UsageError
from ..launch import faults
from ..launch import rails as railbind
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
    "of one host, busbw per host. 2. Between hosts, in two to four rounds whatever the "
    "host count: hosts in disjoint pairs, local rank i of one with local rank i of the "
    "other (one rail per local rank), every rail of every pair at once, both directions at "
    "once (nccl-tests' sendrecv between two ranks: busbw = size / time). Round 1 pairs "
    "hosts inside each leaf switch, round 2 across leaves (--topology, or SLURM's), rounds "
    "3-4 pair whatever two links could explain with a host proven good. The verdict is the "
    "fewest links that explain every failed rail: a host's rail, a leaf's uplink, a rail's "
    "switch; a host fails only when all its rails fail. Port error counters are read "
    "before and after each round. 3. The collective over every rank. Thresholds: "
    "--expect FILE, else --baseline FILE (x --min), else relative (below 0.8 of the median "
    "host or rail pair of the first round). Exit 0 when every host and link passed, 1 when "
    "any failed, 2 on bad input.")
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
                        "of the same collective, size and rank layout: fail below --min-share of it")
    options.add_min_share(p, "with --baseline: fail", "it", thresholds.RELATIVE)
    options.old_spelling(p, "--min", "min_share", "--min-share", type=options.share_arg,
                         metavar="F")
    p.add_argument("--json", metavar="PATH", help="write every figure and verdict (never overwrites)")
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
    options.add_backend(p, options.TORCH_BACKENDS)


def check_args(args):
    if args.expect and args.baseline:
        raise UsageError("give --expect or --baseline, not both (--expect would win)")
    if args.rails is not None:
        try:
            railbind.parse(args.rails)
        except ValueError as exc:
            raise UsageError(str(exc).replace(railbind.VAR, "--rails")) from None
        os.environ[railbind.VAR] = args.rails      # bootstrap binds each rank from it


def read_inputs(session, args):
    """--expect and --baseline, read on rank 0 only (a path the other hosts may not see)."""
    args.limits = inputs.on_rank0(session, args.expect, thresholds.read_expect, "--expect") \
        if args.expect else None
    # --collective also names the collective of a printed baseline that does not name it
    args.baseline_doc = inputs.on_rank0(
        session, args.baseline, lambda path: reader.load(path, args.collective), "--baseline") \
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
    fabric = _fabric(session, args, names, ppn)        # bad topology: exit 2 before any test
    out = open_output(session, "check", args)
    rates = session.comm.gather(line_rate(), root=0)
    records, versions = jobinfo.gather(session)
    guard.arm(session, args.timeout or float(round(60 + (args.warmup + args.iters) * 2 * size / 1e9)),
              "check: start-up")
    report = Report(session, out, args, coll, size, ppn, names, members, limits, rates) \
        if session.rank == 0 else None
    if report:
        report.header(records, versions)
        out.csv_from(report.csv)
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
    # 2. between hosts, in rounds of disjoint host pairs, every rail at once
    if len(names) > 1:
        _pair_rounds(session, backend, size, args, names, members, fabric, report)
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
    found, skipped = thresholds.baseline_limits(args.baseline_doc, args.baseline, args.collective,
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
    # In place, each rank's part of the buffer is at its rank in the group that calls.
    me = session.rank if group is None else backend.dist.get_rank(group)
    send, recv = iteration_views(buf[c.recv:], buf, c, mode, me, 1)[0]
    ctx = Ctx(rank=me, n=n, root=-1, op="sum", dtype=DTYPE, count=c.param,
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


def _fabric(session, args, names, ppn):
    """Rank 0's tomography.Fabric (None elsewhere): the switches (_switches), a rail per
    local rank, named by the interface each rank was bound to."""
    rails = session.comm.gather(session.rail, root=0)
    topo = _switches(session, args, names)
    if session.rank != 0:
        return None
    index = {h: i for i, h in enumerate(names)}
    nics = {(index[session.hosts[r]], rail[0]): rail[1] for r, rail in enumerate(rails) if rail}
    return tomography.Fabric(names, ppn, topo, nics)


def _switches(session, args, names):
    """The switch tree, read on rank 0 and the same on every rank (bad input: UsageError on
    every rank): from --topology FILE, else SLURM's when the job runs under it, else one
    switch."""
    if args.topology:
        return inputs.on_rank0(session, args.topology, lambda path: _tree(
            topology.read_file(path), path, names, True), "--topology")
    if os.environ.get("SLURM_JOB_ID"):
        source = "scontrol show topology"
        return inputs.on_rank0(session, source, lambda _: _tree(
            topology.from_slurm(), source, names, False))
    return topology.single(names)


def _tree(text, source, names, strict):
    """The job's hosts under the switches that text describes (no text: one switch)."""
    return topology.build(topology.parse(text, source), names, source, strict) if text \
        else topology.single(names)


def _pair_rounds(session, backend, size, args, names, members, fabric, report):
    """The rounds: rank 0 plans host pairs (fabricplan), every local rank i of a pair's
    hosts exchanges with its rank i, every pair and rail at once; counters are read on
    each host's first rank before and after each round."""
    bench = PairBench(session, backend, size, 1, args.iters, args.warmup, 1, True)
    session.agree(bench.allocate(True), 1)
    rounds = fabricplan.FabricRounds(fabric) if report else None
    reader_rank = session.local_rank == 0
    while True:
        todo = rounds.next_round() if rounds else None
        todo = session.comm.bcast(todo, root=0)
        if not todo:
            break
        ranks = [(members[names[a]][i], members[names[b]][i])
                 for a, b in todo for i in range(len(members[names[a]]))]
        session.watch.arm(f"check: round of {len(todo)} host pairs x {len(ranks) // len(todo)} rails")
        before = counters.snapshot() if reader_rank else None
        start = time.perf_counter()
        records = bench.run_round(ranks, with_latency=False)
        seconds = time.perf_counter() - start
        moved = counters.delta(before, counters.snapshot()) if reader_rank else None
        fault = faults.get("counter", session.rank)
        if fault is not None and moved is not None:     # test-only: a counter that moved
            moved.append({"port": session.rail[1] if session.rail else "eth0",
                          "what": fault or "symbol_error", "moved": 1})
        gathered = session.comm.gather((records, moved), root=0)
        if report:
            rounds.record(report.pair_round(todo, [g[0] for g in gathered], seconds,
                                            {session.hosts[r]: g[1] for r, g in enumerate(gathered)
                                             if g[1] is not None}))
    bench.send_buf = bench.recv_buf = None
    if report:
        report.pair_verdict(rounds.verdict(), fabric)


class Report:
    """Rank 0: the figures as they come, the thresholds, the verdicts, the files."""

    def __init__(self, session, out, args, coll, size, ppn, names, members, limits, rates):
        self.s, self.out, self.args, self.coll = session, out, args, coll
        self.size, self.ppn, self.names, self.members = size, ppn, names, members
        self.limits = limits
        self.rate = {session.hosts[r]: rate for r, rate in enumerate(rates)}
        self.hosts = {h: {"host": h, "ranks": members[h], "line_rate_gbps": self.rate[h],
                          "intra": None, "pairs": [], "verdict": "PASS", "reasons": [],
                          "rails_failed": []}
                      for h in names}
        self.figures = {"intra": [], "pair": [], "job": []}
        self.doc = {"config": {"collective": coll.name, "size": size, "ranks_per_host": ppn,
                               "world": session.size, "hosts": names, "iters": args.iters,
                               "warmup": args.warmup,
                               "thresholds": {t: limits.get(t) for t in thresholds.TESTS}},
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
        for test in thresholds.TESTS:
            lim = self.limits.get(test)
            self.say(f"# threshold {test}: " + (_limit_text(lim) if lim else (f"relative: below {thresholds.RELATIVE:g} of the median "
                             + (("pair" if self.ppn == 1 else "rail of a pair") + " in round 1"
                                if test == "pair" else "host")
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
        lim = self.limits.get("intra") or {"min_busbw_GBps": thresholds.relative(self.figures["intra"]),
                                           "source": f"{thresholds.RELATIVE:g} x the median host"}
        self.doc["config"]["thresholds"]["intra"] = lim
        for h in self.names:
            why = thresholds.below(self.hosts[h]["intra"], lim)
            if why:
                self._fail(h, f"inside the host: {why}")
        self.say(f"# 1. inside each host: {self.coll.name} among its {self.ppn} ranks, all hosts "
                 f"at once; median busbw {median(self.figures['intra']):.3f} GB/s")
        self.save()

    def pair_round(self, todo, records, seconds, moved):
        """One round's host pairs: a figure per rail, judged; returns {(a, b): [passed per
        rail]} over host indices. moved: {host: counter changes during the round}."""
        times = pairs.slower_end(records)
        figs = {}
        for a, b in todo:
            figs[(a, b)] = []
            for i in range(self.ppn):
                ra, rb = self.members[self.names[a]][i], self.members[self.names[b]][i]
                t = median(times[(ra, rb)])        # both ends record (ra, rb): both ways at once
                bw = algbw(self.size, t)
                figs[(a, b)].append({"time_us": t * 1e6, "algbw_GBps": bw, "busbw_GBps": bw})
        k = len(self.doc["rounds"]) + 1
        if self.pair_limit is None:       # relative: the first round sets the reference
            self.pair_limit = {"min_busbw_GBps": thresholds.relative(
                [f["busbw_GBps"] for per in figs.values() for f in per]),
                "source": f"{thresholds.RELATIVE:g} x the median " + ("pair" if self.ppn == 1
                                                                  else "rail of a pair")}
            self.doc["config"]["thresholds"]["pair"] = self.pair_limit
        result, lines = {}, []
        for (a, b), per in figs.items():
            ha, hb = self.names[a], self.names[b]
            rate = self._pair_rate(ha, hb)
            oks = []
            for i, f in enumerate(per):
                why = thresholds.below(f, self.pair_limit)
                oks.append(why is None)
                for me, other in ((ha, hb), (hb, ha)):
                    self.hosts[me]["pairs"].append({"partner": other, "round": k, "rail": i, **f,
                                                    "passed": why is None, "why": why})
                self.figures["pair"].append(f["busbw_GBps"])
            result[(a, b)] = oks
            bad = [i for i, ok in enumerate(oks) if not ok]
            lines.append(f"{ha}-{hb} " + "|".join(f"{f['busbw_GBps']:.3f}" for f in per)
                         + share_text(min(f["busbw_GBps"] for f in per), rate)
                         + ("" if not bad else " FAIL" if self.ppn == 1 else
                            f" FAIL rail {','.join(map(str, bad))}"))
        self.doc["rounds"].append([[self.names[a], self.names[b]] for a, b in todo])
        self.doc.setdefault("round_seconds", []).append(seconds)
        self.doc.setdefault("counters_moved", []).append({h: c for h, c in moved.items() if c})
        self.say(f"# 2. between hosts, round {k}: {len(todo)} pair{'s' if len(todo) != 1 else ''}"
                 + (f" x {self.ppn} rails" if self.ppn > 1 else "")
                 + " at once, busbw GB/s: " + ", ".join(lines[:8])
                 + (f", ... ({len(lines) - 8} more)" if len(lines) > 8 else "")
                 + f" ({seconds:.2f} s)")
        self.save()
        return result

    def _moved(self, host, ports=None):
        """Counter changes on a host over every round, on the given ports (all: None); a
        counter's rises summed."""
        out, sums = [], {}
        for per_round in self.doc.get("counters_moved", []):
            for c in counters.on_ports(per_round.get(host, []), ports):
                if "moved" in c:
                    key = (c["port"], c["what"])
                    if key not in sums:
                        sums[key] = dict(c, moved=0)
                        out.append(sums[key])
                    sums[key]["moved"] += c["moved"]
                else:
                    out.append(c)
        return out

    def _failed_with(self, host, rail=None):
        """'h4 (0.015 GB/s), h2 (0.016 GB/s)': the partners a host (or one rail of it)
        failed with."""
        timed = "max_latency_us" in self.pair_limit
        return ", ".join(f"{p['partner']} ({_bw(p['busbw_GBps'])} GB/s"
                         + (f", {p['time_us']:.0f} us)" if timed else ")")
                         for p in self.hosts[host]["pairs"]
                         if not p["passed"] and (rail is None or p["rail"] == rail))

    def pair_verdict(self, verdict, fabric):
        names = fabric.names
        passed_somewhere = {h for h in names if any(p["passed"] for p in self.hosts[h]["pairs"])}
        for i in verdict["failed_hosts"]:
            h = names[i]
            failed = {p["partner"] for p in self.hosts[h]["pairs"] if not p["passed"]}
            proven = failed & passed_somewhere
            moved = self._moved(h)
            self._fail(h, f"between hosts: below {_limit_text(self.pair_limit)} with "
                       + self._failed_with(h)
                       + (f"; {len(proven)} of {len(failed)} passed with other hosts" if proven
                          else "; none passed with another host to compare")
                       + (f"; counters moved: {counters.describe(moved)}" if moved else ""))
        drained = set(verdict["failed_hosts"])
        suspects = []
        for link in verdict["named"]:
            if link[0] == "nic" and link[1] in drained:
                continue
            text = fabric.name(link)
            if link[0] == "nic":
                h, rail = names[link[1]], link[2]
                nic = fabric.nics.get((link[1], rail))
                moved = self._moved(h, {nic} if nic else None)
                why = (f"rail {rail}" + (f" ({nic})" if nic else "") + f": below "
                       f"{_limit_text(self.pair_limit)} with {self._failed_with(h, rail)}; its "
                       f"other rails passed" + (f"; counters moved: {counters.describe(moved)}"
                                                if moved else ""))
                self.hosts[h]["rails_failed"].append(rail)
                self.hosts[h]["reasons"].append(why)
                if self.hosts[h]["verdict"] == "PASS":
                    self.hosts[h]["verdict"] = "RAIL"
            suspects.append(text)
        for tie in verdict["ties"]:
            pair = next((verdict["deciders"].get(x) for x in tie if verdict["deciders"].get(x)), None)
            suspects.append(" or ".join(fabric.name(x) for x in tie) + (
                f" (a tie: pairing {names[pair[0]]} with {names[pair[1]]} decides)" if pair else
                " (a tie: every tested path crosses both, no pair of hosts can tell them apart)"))
        for a, b, r in verdict["unexplained"]:
            suspects.append(f"path {names[a]}-{names[b]}" + (f" rail {r}" if fabric.rails > 1 else "")
                            + " (each of its links passed on other paths)")
        self.doc["transient"] = [f"path {names[a]}-{names[b]}"
                                 + (f" rail {r}" if fabric.rails > 1 else "")
                                 for a, b, r in verdict["transient"]]
        self.doc["suspect_links"] = [[names[a], names[b]] for a, b, _ in verdict["unexplained"]]
        self.doc["suspects"] = suspects
        self.doc["pair_rounds"] = verdict["rounds"]
        self.doc["fabric"] = {
            "rails": fabric.rails, "topology": fabric.topo.source,
            "leaves": {h: fabric.leaf[i] for i, h in enumerate(names)} if fabric.topo.source else None,
            "nics": {f"{names[h]}:{r}": nic for (h, r), nic in sorted(fabric.nics.items())},
            "named": [fabric.name(x) for x in verdict["named"]],
            "ties": [[fabric.name(x) for x in t] for t in verdict["ties"]]}

    def job(self, gathered):
        mean = dict(gathered[0], seconds=sum(r["seconds"] for r in gathered) / len(gathered))
        fig = self._figure(mean)
        self.doc["job"] = fig
        self.figures["job"] = [fig["busbw_GBps"]] if fig["busbw_GBps"] else []
        lim = self.limits.get("job")
        self.job_failed = thresholds.below(fig, lim)
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
            by = {}
            for p in e["pairs"]:            # one entry per partner, its rails joined by |
                by.setdefault((p["round"], p["partner"]), []).append(p)
            partners = ", ".join(
                f"{other} " + "|".join(_bw(p["busbw_GBps"]) for p in ps)
                + share_text(min(p["busbw_GBps"] or 0 for p in ps), self._pair_rate(h, other))
                for (_, other), ps in by.items()) or "-"
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
        suspects = self.doc.get("suspects", [])
        hostlist = compress_hostlist(failing)
        self.doc.update(failing_hosts=failing, hostlist=hostlist)
        self.say("#")
        for h in self.names:            # counters that moved where everything passed
            moved = self._moved(h)
            if moved and self.hosts[h]["verdict"] == "PASS":
                self.say(f"# WARNING {h} passed, but its counters moved: {counters.describe(moved)}")
        for path in self.doc.get("transient", []):
            self.say(f"# WARNING {path} failed once and passed when tested again")
        if failing:
            self.say(f"# FAILING HOSTS ({len(failing)} of {len(self.names)}): {hostlist}")
            self.say(f'scontrol update NodeName={hostlist} State=DRAIN Reason="mpibench check failed"')
        else:
            self.say(f"# every host passed ({len(self.names)})" if not suspects else
                     f"# no host to drain ({len(self.names)} hosts): only the links and switches "
                     f"below are suspect")
        if suspects:
            self.say(f"# SUSPECT LINKS AND SWITCHES ({len(suspects)}, for the fabric team): "
                     + "; ".join(suspects))
        self.save()
        self.out.finish()
        problems = ([f"{len(failing)} host{'s' if len(failing) != 1 else ''} failed: {hostlist}"]
                    if failing else []) + \
            ([f"{len(suspects)} suspect link{'s' if len(suspects) != 1 else ''} or switch"
              f"{'es' if len(suspects) != 1 else ''}: " + "; ".join(suspects)] if suspects else []) + \
            ([f"the whole job: {self.job_failed}"] if self.job_failed else [])
        return "check FAILED: " + "; ".join(problems) if problems else None

    def csv(self, doc):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["host", "ranks", "intra_busbw_GBps", "partner", "round", "rail",
                    "pair_busbw_GBps", "line_rate_gbps", "verdict", "reason"])
        for e in (doc.get("check") or {}).get("hosts", []):
            intra = "" if e["intra"] is None else e["intra"]["busbw_GBps"]
            for p in e["pairs"] or [None]:
                w.writerow([e["host"], len(e["ranks"]), intra, p["partner"] if p else "",
                            p["round"] if p else "", p.get("rail", 0) if p else "",
                            p["busbw_GBps"] if p else "",
                            e["line_rate_gbps"] or "", e["verdict"], "; ".join(e["reasons"])])
        return buf.getvalue()


def _limit_text(lim):
    """'min_busbw_GBps 40 (--expect FILE)': a test's limits and where they come from."""
    return ", ".join(f"{k} {v:.4g}" for k, v in lim.items() if k != "source") + f" ({lim['source']})"


def _bw(value):
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"

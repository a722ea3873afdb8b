"""`check`'s limits for each test (--expect FILE, --baseline RESULT, or a share of the median)
and its judgement on rank 0, without processes: each figure against its limits, pass or fail
per host, pair and rail, the hosts to drain and the suspect links; a miss is measured again
before it is condemned (docs/commands/check.md, "Nothing condemned on one measurement").
"""
from statistics import mean, median
from typing import TYPE_CHECKING, Any, Collection, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..errors import UsageError
from ..launch.slurm import compress_hostlist
from ..measure.collectives.base import algbw, busbw
from ..measure.iterstats import slowest, spread_pct
from ..results import numbers
from ..results.checktext import bw, limit_text, retest_text, spread_text
from ..results.document import finite, parse
from . import hostfacts, pairs

if TYPE_CHECKING:
    from .tomography import Fabric

TESTS = ("intra", "pair", "job")
LIMITS = ("min_busbw_GBps", "max_latency_us")
RELATIVE = 0.8          # relative mode: fail below this share of the median host or pair
RETESTS = 4        # suspect hosts measured again alone, one at a time; any more together
ROUNDS = 3         # a suspect host is condemned when it misses in each of this many retests,
PAUSE = 1.0        # seconds apart: a burst of other work on a shared machine lasts about one
MOVED = "; counters moved: "
Figure = Dict[str, Any]     # time_us, algbw_GBps, busbw_GBps, spread_pct, best_us (figure())
Limits = Mapping[str, Any]  # min_busbw_GBps and/or max_latency_us, and their source
HostPair = Tuple[int, int]  # host indices


def read_expect(path: str) -> Dict[str, Dict[str, float]]:
    """--expect FILE: {test: {limit: value}} of TESTS and LIMITS; anything else, UsageError."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError as exc:
        raise UsageError(f"cannot read --expect {path}: {exc.strerror or exc}") from None
    try:
        doc = parse(data)
    except Exception as exc:        # resultsfile's refusal: bad UTF-8/JSON, NaN, duplicates
        raise UsageError(f"--expect {path}: {exc}") from None
    where = f"--expect {path}"
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{where}: expected an object such as "
                         f'{{"pair": {{"min_busbw_GBps": 20}}}} (tests: {", ".join(TESTS)})')
    for test, limits in doc.items():
        if test not in TESTS:
            raise UsageError(f"{where}: unknown test {test!r} (tests: {', '.join(TESTS)})")
        if not isinstance(limits, dict) or not limits:
            raise UsageError(f"{where}: {test} must be an object with {' and/or '.join(LIMITS)}")
        for key, value in limits.items():
            if key not in LIMITS:
                hint = ("; give the unit in the name: " + " or ".join(LIMITS)
                        if key in ("min_busbw", "max_latency", "busbw", "latency") else "")
                raise UsageError(f"{where}: {test}.{key} is not a limit (limits: "
                                 f"{', '.join(LIMITS)}){hint}")
            if not (finite(value) and value > 0):
                raise UsageError(f"{where}: {test}.{key} must be a number above 0, not "
                                 f"{'null' if value is None else repr(value)}")
    return {test: dict(limits) for test, limits in doc.items()}


def relative(values: Sequence[Optional[float]], what: str, few: str) -> Dict[str, Any]:
    """RELATIVE x the median `what` (few: what decides when too few say which is slow)."""
    known = [v for v in values if v is not None]
    return {"min_busbw_GBps": RELATIVE * median(known) if known else None,
            "source": f"{RELATIVE:g} x the median {what}" + (
                "" if len(values) >= 3 else f" of {len(values)}, too few to say which is slow: {few}")}


def below(figure: Optional[Mapping[str, Any]], limits: Optional[Limits]) -> Optional[str]:
    """Why a figure {'busbw_GBps', 'time_us'} misses its limits, or None when it meets them."""
    if figure is None or limits is None:
        return None
    why = []
    low = limits.get("min_busbw_GBps")
    if low is not None and (figure["busbw_GBps"] is None or figure["busbw_GBps"] < low):
        why.append(f"busbw {numbers.figure(figure['busbw_GBps'])} < {low:.3g} GB/s ({limits['source']})")
    high = limits.get("max_latency_us")
    if high is not None and figure["time_us"] > high:
        why.append(f"time {figure['time_us']:.1f} us > {high:.3g} us ({limits['source']})")
    return "; ".join(why) or None


def baseline_limits(doc: Mapping[str, Any], path: str, *, collective: str, size: int, ranks_per_host: int,
                    world: int, share: float, sizes: Collection[int] = ()
                    ) -> Tuple[Dict[str, Dict[str, float]], Optional[str]]:
    """Limits from an earlier `check`, or a run or nccl-tests result of the whole job or one
    host (sizes: the size aligned for the ranks); UsageError for one of something else."""
    where = f"--baseline {path}"
    if doc.get("command") == "check" and isinstance(doc.get("check"), dict):
        return _check_limits(doc["check"], where, (collective, size, ranks_per_host), world, share)
    at = _baseline_rows(doc, where, collective, size, sizes)
    ranks = (doc.get("world") or {}).get("size")
    if ranks is None:
        raise UsageError(f"{where}: its rank count is unknown (no complete rank lines, and its "
                         f"rows do not decide it): a baseline must say how many ranks it "
                         f"measured")
    tests = [t for t, n in (("job", world), ("intra", ranks_per_host)) if ranks == n]
    if not tests:
        raise UsageError(f"{where}: measured on {ranks} ranks; this check runs {world} ranks "
                         f"({ranks_per_host} per host): give a baseline of the whole job or of "
                         f"one host")
    bws = [m["busbw_GBps"] for r in at for m in (r.get("out_of_place"), r.get("in_place"))
           if m and m.get("busbw_GBps")]
    if not bws:
        raise UsageError(f"{where}: its {collective} row at {size} bytes has no busbw")
    return {t: {"min_busbw_GBps": share * max(bws)} for t in tests}, None


def _check_limits(c: Mapping[str, Any], where: str, mine: Tuple[str, int, int], world: int,
                  share: float) -> Tuple[Dict[str, Dict[str, float]], Optional[str]]:
    """Limits from an earlier check of the same collective, size and ranks per host: share x the
    median of each test's figures; 'job' where it ran on another number of ranks (not comparable)."""
    cfg: Dict[str, Any] = c["config"] if isinstance(c.get("config"), dict) else {}
    figures: Dict[str, Any] = c["figures"] if isinstance(c.get("figures"), dict) else {}
    if not cfg:
        raise UsageError(f"{where}: a check result without its config (collective, size, "
                         f"ranks per host)")
    theirs = (cfg.get("collective"), cfg.get("size"), cfg.get("ranks_per_host"))
    if theirs != mine:
        raise UsageError(f"{where}: it checked {theirs[0]} at {theirs[1]} bytes with "
                         f"{theirs[2]} ranks per host; this check runs {mine[0]} at {mine[1]} bytes with "
                         f"{mine[2]} ranks per host")
    figs = {t: [x for x in figures[t] if finite(x) and x > 0] for t in TESTS
            if isinstance(figures.get(t), list)}
    return ({t: {"min_busbw_GBps": share * median(f)} for t, f in figs.items() if f},
            None if cfg.get("world") == world else "job")


def _baseline_rows(doc: Mapping[str, Any], where: str, collective: str, size: int,
                   sizes: Collection[int]) -> List[Dict[str, Any]]:
    """A result's rows of the collective at the size (or one of sizes); UsageError naming what is
    not there."""
    rows = [r for r in doc["results"] if r["collective"] == collective]
    held = [t["test"] for t in doc.get("tests") or [] if t.get("collective") == collective]
    if len(held) > 1:
        raise UsageError(f"{where}: {len(held)} tests of {collective} in one log (tests "
                         f"{', '.join(map(str, held))}): keep the one to judge against in a "
                         f"file of its own")
    if not rows:
        have = sorted({r["collective"] for r in doc["results"]})
        raise UsageError(f"{where}: no {collective} in it (it has {', '.join(have) or 'no rows'}); "
                         f"give --collectives NAME to match")
    at = [r for r in rows if r["size"] == size or r["size"] in sizes]
    if not at:
        raise UsageError(f"{where}: no {collective} row at {size} bytes (its sizes: "
                         f"{', '.join(str(r['size']) for r in rows[:12])}); give -b to match")
    return at


def figure(rec: Mapping[str, Any]) -> Figure:
    """The figures of one timed collective; from its per-call 'times', their spread and best."""
    alg = algbw(rec["bw_bytes"], rec["seconds"])
    times = rec.get("times")
    return {"time_us": rec["seconds"] * 1e6, "algbw_GBps": alg, "busbw_GBps": busbw(alg, rec["factor"]),
            "spread_pct": spread_pct(times) if times else None,
            "best_us": min(times) * 1e6 if times else None}


def fastest(fig: Figure) -> Figure:
    """The figure its fastest call alone would give (itself when calls were not timed)."""
    if not fig.get("best_us") or not fig["busbw_GBps"]:
        return fig
    return dict(fig, time_us=fig["best_us"], busbw_GBps=fig["busbw_GBps"] * fig["time_us"] / fig["best_us"])


def joint(recs: Sequence[Mapping[str, Any]]) -> Figure:
    """The figure of ranks timed together: their mean time (nccl-tests' -a 1), each call the slowest's."""
    return figure(dict(recs[0], seconds=mean(r["seconds"] for r in recs),
                       times=slowest([r["times"] for r in recs]) if recs[0].get("times") else None))


def per_host(gathered: Iterable[Optional[Mapping[str, Any]]]) -> Dict[str, Figure]:
    """{host: joint figure of its ranks} from the records of the ranks that took part."""
    by: Dict[str, List[Mapping[str, Any]]] = {}
    for rec in filter(None, gathered):
        by.setdefault(rec["host"], []).append(rec)
    return {h: joint(recs) for h, recs in by.items()}


def sure(fig: Figure, lim: Optional[Limits]) -> bool:
    """Whether a miss is beyond the figure's own spread: even its fastest call misses.
    Other work on a host only slows calls; a lasting fault slows every one."""
    return below(fastest(fig), lim) is not None


def reason(fig: Figure, lim: Optional[Limits]) -> Optional[str]:
    """Why a figure misses its limits, how far and against what spread; None when it meets them."""
    why = below(fig, lim)
    if why is None:
        return None
    assert lim is not None
    low, high = lim.get("min_busbw_GBps"), lim.get("max_latency_us")      # the miss, as a share
    miss = max(0.0, 1 - fig["busbw_GBps"] / low if low and fig["busbw_GBps"] is not None else 0.0,
               fig["time_us"] / high - 1 if high else 0.0)
    return why + (f", {miss * 100:.0f}% beyond it" if miss < 1 else f", {miss + 1:.1f} times it") \
        + spread_text(fig)


class Judge:
    """The figures, the thresholds and the verdicts of one check; self.doc is its
    document. config: collective, size, ranks_per_host, world, hosts, iters, warmup."""

    def __init__(self, config: Mapping[str, Any], members: Mapping[str, List[int]],
                 limits: Mapping[str, Dict[str, Any]], rates: Mapping[str, Optional[float]]) -> None:
        self.names: List[str]
        self.names, self.ppn, self.size = config["hosts"], config["ranks_per_host"], config["size"]
        self.members, self.limits = members, limits
        self.hosts: Dict[str, Dict[str, Any]] = {
            h: {"host": h, "ranks": members[h], "line_rate_gbps": rates[h], "intra": None, "pairs": [],
                "verdict": "PASS", "reasons": [], "rails_failed": []}
            for h in self.names}
        self.figures: Dict[str, List[Optional[float]]] = {"intra": [], "pair": [], "job": []}
        self.doc: Dict[str, Any] = {"config": dict(config, thresholds={t: limits.get(t) for t in TESTS}),
                                    "hosts": list(self.hosts.values()), "rounds": [], "suspect_links": [],
                                    "figures": self.figures, "intra_retest": [], "transient": []}
        self.pair_limit = limits.get("pair")
        self.job_failed: Optional[str] = None
        self.suspects: Dict[str, str] = {}        # host: why it missed inside the host at first
        # suspect: its misses in the retests so far (None: passed)
        self.pending: Dict[str, List[Optional[str]]] = {}

    def intra(self, gathered: Iterable[Optional[Mapping[str, Any]]]) -> List[Optional[float]]:
        """Test 1: each host's figure against its floor (a host below is a suspect); the busbws."""
        for h, fig in per_host(gathered).items():
            self.hosts[h]["intra"] = fig
        self.figures["intra"] = [self.hosts[h]["intra"]["busbw_GBps"] for h in self.names]
        lim = self.limits.get("intra") or relative(self.figures["intra"], "host", "the retest decides")
        self.doc["config"]["thresholds"]["intra"] = lim
        self.suspects = {h: why for h in self.names
                         for why in [reason(self.hosts[h]["intra"], lim)] if why}
        self.pending = {h: [] for h in self.suspects}
        return self.figures["intra"]

    def intra_retests(self) -> List[List[str]]:
        """The next retest round's steps, each the hosts tested while the others wait: with a
        relative floor first the passed host nearest the median (the new floor's reference),
        then RETESTS suspects alone, any more together; [] when done."""
        sus = list(self.pending)
        if not sus or len(self.doc["intra_retest"]) >= ROUNDS:
            return []
        steps = []
        if "intra" not in self.limits:
            passed = sorted((h for h in self.names if h not in self.suspects),
                            key=lambda h: self.hosts[h]["intra"]["busbw_GBps"])
            steps += [[passed[len(passed) // 2]]] if passed else []
        return steps + [[h] for h in sus[:RETESTS]] + ([sus[RETESTS:]] if sus[RETESTS:] else [])

    def intra_retest(self, steps: Sequence[Sequence[str]],
                     found: Sequence[Iterable[Optional[Mapping[str, Any]]]]) -> List[str]:
        """One retest round's records (per step, every rank's or None), settled; a line per step."""
        figs = [per_host(g) for g in found]
        lim, lines = self.doc["config"]["thresholds"]["intra"], []
        if steps[0][0] not in self.suspects:          # the reference, measured alone
            ref, f = steps[0][0], figs[0][steps[0][0]]
            lim = {"min_busbw_GBps": RELATIVE * f["busbw_GBps"],
                   "source": f"{RELATIVE:g} x {ref} alone"}
            lines.append(retest_text(f"{ref} alone", f, None, "the reference"))
        self.doc["intra_retest"].append({"threshold": lim, "steps": steps, "figures": figs})
        last = len(self.doc["intra_retest"]) == ROUNDS
        for hosts, per in zip(steps, figs):
            for h in (x for x in hosts if x in self.pending):
                how = "alone" if len(hosts) == 1 else f"with {len(hosts) - 1} other suspects"
                self.hosts[h].setdefault("intra_retest", []).append(per[h])
                lines.append(self._settle(f"{h} inside the host", f"{h} {how}", f", {how}",
                                          self.suspects[h], per[h], lim, self.pending[h], last))
        for h in list(self.pending):
            if not self.pending[h][-1]:               # settled as transient
                del self.pending[h]
            elif last:
                self._fail(h, f"inside the host: {self.suspects[h]}; "
                              + "; ".join(filter(None, self.pending.pop(h))))
        return lines

    def _settle(self, what: str, where: str, how: str, first: Optional[str], fig: Figure, lim: Limits,
                misses: List[Optional[str]], last: bool) -> str:
        """One retest's line: a miss beyond the spread is appended to misses, else None (transient)."""
        why = reason(fig, lim)
        best = f"its fastest call ({bw(fastest(fig)['busbw_GBps'])} GB/s)"
        if why and sure(fig, lim):
            misses.append(f"again{how}: {why}, even {best} missed")
            return retest_text(where, fig, lim, f"FAIL, the miss came back every time, even {best}"
                               if last else f"missed again, even {best}: once more")
        misses.append(None)
        again = retest_text(where, fig, lim, f"within its spread, {best} met it" if why else "passed")
        self.doc["transient"].append({"what": what, "first": first, "again": again})
        return again + ": transient, not condemned"

    def pair_round(self, todo: Sequence[HostPair], records: Iterable[Iterable[Mapping[str, Any]]],
                   seconds: float, moved: Mapping[str, List[Dict[str, Any]]]
                   ) -> Tuple[Dict[HostPair, List[bool]], Dict[HostPair, List[Figure]]]:
        """One round's pairs judged: {(a, b): [passed per rail]}, {(a, b): [figure per rail]}."""
        times = pairs.slower_end(records)
        figs: Dict[HostPair, List[Figure]] = {}
        for a, b in todo:
            # each rail's ranks (ra, rb): both ends record the pair as such, both ways at once
            ends = [times[(self.members[self.names[a]][i], self.members[self.names[b]][i])]
                    for i in range(self.ppn)]
            figs[(a, b)] = [figure({"bw_bytes": self.size, "seconds": median(each), "times": each,
                                    "factor": 1}) for each in ends]
        if self.pair_limit is None:       # relative: the first round sets the reference
            self.pair_limit = relative(
                [f["busbw_GBps"] for per in figs.values() for f in per],
                "pair" if self.ppn == 1 else "rail of a pair", "a failed path is tested again")
            self.doc["config"]["thresholds"]["pair"] = self.pair_limit
        result = {pair: self._judge_pair(pair, per) for pair, per in figs.items()}
        self.doc["rounds"].append([[self.names[a], self.names[b]] for a, b in todo])
        self.doc.setdefault("round_seconds", []).append(seconds)
        self.doc.setdefault("counters_moved", []).append({h: c for h, c in moved.items() if c})
        return result, figs

    def _judge_pair(self, pair: HostPair, per: Sequence[Figure]) -> List[bool]:
        """Each rail of one pair against the pair limit, on both hosts' records: it fails only
        when even its fastest call misses (else a miss is within its spread, noted)."""
        k = len(self.doc["rounds"]) + 1
        ha, hb = self.names[pair[0]], self.names[pair[1]]
        oks = []
        for i, f in enumerate(per):
            why = reason(f, self.pair_limit)
            failed = why is not None and sure(f, self.pair_limit)
            oks.append(not failed)
            for me, other in ((ha, hb), (hb, ha)):
                self.hosts[me]["pairs"].append({"partner": other, "round": k, "rail": i, **f,
                                                "passed": not failed, "why": why if failed else None,
                                                "within_spread": why if why and not failed else None})
            self.figures["pair"].append(f["busbw_GBps"])
        return oks

    def moved(self, host: str, ports: Optional[Collection[str]] = None, lead: str = "") -> str:
        """lead and a host's counter changes over every round on ports (None: all), rises summed; or ''."""
        out: List[Dict[str, Any]] = []
        sums: Dict[Tuple[str, str], Dict[str, Any]] = {}      # a counter's rises summed where it first rose
        for per_round in self.doc.get("counters_moved", []):
            for c in hostfacts.on_ports(per_round.get(host, []), ports):
                key = (c["port"], c["what"])
                if "moved" in c and key in sums:
                    sums[key]["moved"] += c["moved"]
                else:
                    out.append(sums.setdefault(key, dict(c)) if "moved" in c else c)
        return lead + hostfacts.describe_changes(out) if out else ""

    def _failed_with(self, host: str, rail: Optional[int] = None) -> str:
        """'h4 (0.015 GB/s), h2 (0.016 GB/s)': whom a host (or one rail of it) failed with."""
        assert self.pair_limit is not None
        timed = "max_latency_us" in self.pair_limit
        return ", ".join(f"{p['partner']} ({bw(p['busbw_GBps'])} GB/s"
                         + (f", {p['time_us']:.0f} us" if timed else "")
                         + spread_text(p) + ")"
                         for p in self.hosts[host]["pairs"]
                         if not p["passed"] and (rail is None or p["rail"] == rail))

    def pair_verdict(self, verdict: Mapping[str, Any], fabric: "Fabric") -> None:
        """The failed hosts and rails, the suspect links and switches of fabricplan's verdict."""
        self._fail_hosts(verdict["failed_hosts"])
        names = fabric.names
        suspects = self._named_links(verdict, fabric)
        suspects.extend(_tie_suspects(verdict, fabric))
        for a, b, r in verdict["unexplained"]:
            suspects.append(_path_text(fabric, a, b, r) + " (each of its links passed on other paths)")
        for a, b, r in verdict["transient"]:
            self._note_transient(fabric, a, b, r)
        self.doc.update(suspect_links=[[names[a], names[b]] for a, b, _ in verdict["unexplained"]],
                        suspects=suspects, pair_rounds=verdict["rounds"])
        self.doc["fabric"] = _fabric_doc(verdict, fabric)

    def _note_transient(self, fabric: "Fabric", a: int, b: int, r: int) -> None:
        """A path that failed, then passed: its first and its passing test, into the document."""
        names = fabric.names
        tests = [p for p in self.hosts[names[a]]["pairs"] if p["partner"] == names[b]
                 and p["rail"] == r]
        self.doc["transient"].append({
            "what": _path_text(fabric, a, b, r),
            "first": next(f"round {p['round']}: {p['why']}" for p in tests if not p["passed"]),
            "again": next(f"round {p['round']}: busbw {bw(p['busbw_GBps'])} GB/s, passed"
                          for p in tests if p["passed"])})

    def _fail_hosts(self, failed_hosts: Iterable[int]) -> None:
        """Fail the hosts every rail of which failed, saying with whom and what that proves."""
        passed_somewhere = {h for h in self.names if any(p["passed"] for p in self.hosts[h]["pairs"])}
        for i in failed_hosts:
            h = self.names[i]
            failed = {p["partner"] for p in self.hosts[h]["pairs"] if not p["passed"]}
            proven = failed & passed_somewhere
            assert self.pair_limit is not None
            self._fail(h, f"between hosts: below {limit_text(self.pair_limit)} with "
                       + self._failed_with(h)
                       + (f"; {len(proven)} of {len(failed)} passed with other hosts" if proven
                          else "; none passed with another host to compare")
                       + self.moved(h, lead=MOVED))

    def _named_links(self, verdict: Mapping[str, Any], fabric: "Fabric") -> List[str]:
        """The names of the named links but a failed host's; a failed rail makes its host RAIL."""
        drained = set(verdict["failed_hosts"])
        named = [x for x in verdict["named"] if x[0] != "nic" or x[1] not in drained]
        for _, i, rail in (x for x in named if x[0] == "nic"):
            h, nic = fabric.names[i], fabric.nics.get((i, rail))
            self.hosts[h]["rails_failed"].append(rail)
            assert self.pair_limit is not None
            self.hosts[h]["reasons"].append(
                f"rail {rail}" + (f" ({nic})" if nic else "") + f": below "
                f"{limit_text(self.pair_limit)} with {self._failed_with(h, rail)}; its "
                f"other rails passed" + self.moved(h, {nic} if nic else None, MOVED))
            if self.hosts[h]["verdict"] == "PASS":
                self.hosts[h]["verdict"] = "RAIL"
        return [fabric.name(x) for x in named]

    def job(self, gathered: Sequence[Mapping[str, Any]]) -> Figure:
        """Test 3: the whole job's figure, judged (a miss is measured again: job_retest)."""
        self.doc["job"] = fig = joint(gathered)
        self.figures["job"] = [fig["busbw_GBps"]] if fig["busbw_GBps"] else []
        self.job_failed = reason(fig, self.limits.get("job"))
        return fig

    def job_retest(self, gathered: Sequence[Mapping[str, Any]]) -> str:
        """The whole job measured again: its line (job_failed stays if it missed beyond its spread)."""
        misses: List[Optional[str]] = []
        first, fig = self.job_failed, joint(gathered)
        self.doc["job_retest"] = fig
        line = self._settle("the whole job", "the whole job again", "", first, fig,
                            self.limits["job"], misses, True)
        self.job_failed = misses[0] and f"{first}; {misses[0]}"
        return line

    def counter_warnings(self) -> List[Tuple[str, str]]:
        """[(host, 'its counters moved: ...')] for the hosts that passed all the same."""
        return [(h, f"its counters moved: {moved}") for h in self.names
                for moved in [self.moved(h)] if moved and self.hosts[h]["verdict"] == "PASS"]

    def path_findings(self, found: Iterable[Mapping[str, Any]]) -> List[Tuple[str, str]]:
        """Links below their rating (diagnose/pathlimits.py's findings) joined to the verdicts: a
        failing host's reasons, else [(host, text)] warnings for the hosts that passed."""
        warnings = []
        for f in found:
            entry = self.hosts.get(f["host"])
            if entry is None:
                continue
            entry.setdefault("links", []).append(f["text"])
            if entry["verdict"] == "FAIL":
                entry["reasons"].append(f"link below its rating: {f['text']}")
            else:
                warnings.append((f["host"], f"a link below its rating: {f['text']}"))
        return warnings

    def _fail(self, host: str, reason: str) -> None:
        self.hosts[host]["verdict"] = "FAIL"
        self.hosts[host]["reasons"].append(reason)

    def failing(self) -> Tuple[List[str], str]:
        """The hosts to drain, and their hostlist (both into the document)."""
        failing = [h for h in self.names if self.hosts[h]["verdict"] == "FAIL"]
        self.doc.update(failing_hosts=failing, hostlist=compress_hostlist(failing))
        return failing, self.doc["hostlist"]

    def failure(self) -> Optional[str]:
        """check's failure message, or None when every host and link passed."""
        failing, suspects = self.doc["failing_hosts"], self.doc.get("suspects", [])
        problems = [f"{len(failing)} {numbers.plural(len(failing), 'host')} failed: "
                    f"{self.doc['hostlist']}"] if failing else []
        if suspects:
            problems.append(f"{len(suspects)} suspect {numbers.plural(len(suspects), 'link')} or "
                            f"{numbers.plural(len(suspects), 'switch', 'switches')}: " + "; ".join(suspects))
        if self.job_failed:
            problems.append(f"the whole job: {self.job_failed}")
        return "check FAILED: " + "; ".join(problems) if problems else None


def _path_text(fabric: "Fabric", a: int, b: int, r: int) -> str:
    """'path h1-h2 rail 1' (no rail where hosts have one)."""
    names = fabric.names
    return f"path {names[a]}-{names[b]}" + (f" rail {r}" if fabric.rails > 1 else "")


def _tie_suspects(verdict: Mapping[str, Any], fabric: "Fabric") -> List[str]:
    """Each tie of the verdict named, with the pair of hosts that decides it where one can."""
    names, out = fabric.names, []
    for tie in verdict["ties"]:
        pair = next((verdict["deciders"].get(x) for x in tie if verdict["deciders"].get(x)), None)
        out.append(" or ".join(fabric.name(x) for x in tie) + (
            f" (a tie: pairing {names[pair[0]]} with {names[pair[1]]} decides)" if pair else
            " (a tie: every tested path crosses both, no pair of hosts can tell them apart)"))
    return out


def _fabric_doc(verdict: Mapping[str, Any], fabric: "Fabric") -> Dict[str, Any]:
    """The document's fabric: rails, topology, leaves, NICs, the named and tied links."""
    names = fabric.names
    return {
        "rails": fabric.rails, "topology": fabric.topo.source,
        "leaves": {h: fabric.leaf[i] for i, h in enumerate(names)} if fabric.topo.source else None,
        "nics": {f"{names[h]}:{r}": nic for (h, r), nic in sorted(fabric.nics.items())},
        "named": [fabric.name(x) for x in verdict["named"]],
        "ties": [[fabric.name(x) for x in t] for t in verdict["ties"]]}

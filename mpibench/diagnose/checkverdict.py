"""`check`'s judgement on rank 0, without processes: each figure as it comes held to its
limits (limits.py), pass or fail per host, per pair of hosts and per rail, the links the
failed paths name (fabricplan and tomography decide which) and the verdict: the hosts to
drain, the suspect links. Everything goes into the document's "check"."""
from statistics import median

from ..launch.slurm import compress_hostlist
from ..measure.collectives.base import algbw, busbw
from ..results.checktext import bw, limit_text, plural
from . import counters, limits as thresholds, pairs


def figure(rec):
    """{'time_us', 'algbw_GBps', 'busbw_GBps'} of one timed collective (seconds per call)."""
    alg = algbw(rec["bw_bytes"], rec["seconds"])
    return {"time_us": rec["seconds"] * 1e6, "algbw_GBps": alg, "busbw_GBps": busbw(alg, rec["factor"])}


class Judge:
    """The figures, the thresholds and the verdicts of one check; self.doc is its
    document. config: collective, size, ranks_per_host, world, hosts, iters, warmup."""

    def __init__(self, config, members, limits, rates):
        self.names, self.ppn, self.size = config["hosts"], config["ranks_per_host"], config["size"]
        self.members, self.limits = members, limits
        self.hosts = {h: {"host": h, "ranks": members[h], "line_rate_gbps": rates[h],
                          "intra": None, "pairs": [], "verdict": "PASS", "reasons": [],
                          "rails_failed": []}
                      for h in self.names}
        self.figures = {"intra": [], "pair": [], "job": []}
        self.doc = {"config": dict(config, thresholds={t: limits.get(t) for t in thresholds.TESTS}),
                    "hosts": list(self.hosts.values()), "rounds": [], "suspect_links": [],
                    "figures": self.figures}
        self.pair_limit = limits.get("pair")
        self.job_failed = None

    def intra(self, gathered):
        """Test 1: each host's figure (the mean time of its ranks), judged; the busbws."""
        per_host = {}
        for rec in gathered:
            per_host.setdefault(rec["host"], []).append(rec)
        for h, recs in per_host.items():
            mean = dict(recs[0], seconds=sum(r["seconds"] for r in recs) / len(recs))
            self.hosts[h]["intra"] = figure(mean)
        self.figures["intra"] = [self.hosts[h]["intra"]["busbw_GBps"] for h in self.names]
        lim = self.limits.get("intra") or {
            "min_busbw_GBps": thresholds.relative(self.figures["intra"]),
            "source": f"{thresholds.RELATIVE:g} x the median host"}
        self.doc["config"]["thresholds"]["intra"] = lim
        for h in self.names:
            why = thresholds.below(self.hosts[h]["intra"], lim)
            if why:
                self._fail(h, f"inside the host: {why}")
        return self.figures["intra"]

    def pair_round(self, todo, records, seconds, moved):
        """One round's host pairs (host indices), from every rank's PairBench records: a
        figure per rail, judged. Returns {(a, b): [passed per rail]} and {(a, b): [figure
        per rail]}. moved: {host: counter changes during the round}."""
        times = pairs.slower_end(records)
        figs = {}
        for a, b in todo:
            figs[(a, b)] = []
            for i in range(self.ppn):
                ra, rb = self.members[self.names[a]][i], self.members[self.names[b]][i]
                t = median(times[(ra, rb)])        # both ends record (ra, rb): both ways at once
                speed = algbw(self.size, t)
                figs[(a, b)].append({"time_us": t * 1e6, "algbw_GBps": speed, "busbw_GBps": speed})
        if self.pair_limit is None:       # relative: the first round sets the reference
            self.pair_limit = {"min_busbw_GBps": thresholds.relative(
                [f["busbw_GBps"] for per in figs.values() for f in per]),
                "source": f"{thresholds.RELATIVE:g} x the median "
                          + ("pair" if self.ppn == 1 else "rail of a pair")}
            self.doc["config"]["thresholds"]["pair"] = self.pair_limit
        result = {pair: self._judge_pair(pair, per) for pair, per in figs.items()}
        self.doc["rounds"].append([[self.names[a], self.names[b]] for a, b in todo])
        self.doc.setdefault("round_seconds", []).append(seconds)
        self.doc.setdefault("counters_moved", []).append({h: c for h, c in moved.items() if c})
        return result, figs

    def _judge_pair(self, pair, per):
        """Each rail of one pair of hosts against the pair limit, on both hosts' records."""
        k = len(self.doc["rounds"]) + 1
        ha, hb = self.names[pair[0]], self.names[pair[1]]
        oks = []
        for i, f in enumerate(per):
            why = thresholds.below(f, self.pair_limit)
            oks.append(why is None)
            for me, other in ((ha, hb), (hb, ha)):
                self.hosts[me]["pairs"].append({"partner": other, "round": k, "rail": i, **f,
                                                "passed": why is None, "why": why})
            self.figures["pair"].append(f["busbw_GBps"])
        return oks

    def moved(self, host, ports=None):
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
        return ", ".join(f"{p['partner']} ({bw(p['busbw_GBps'])} GB/s"
                         + (f", {p['time_us']:.0f} us)" if timed else ")")
                         for p in self.hosts[host]["pairs"]
                         if not p["passed"] and (rail is None or p["rail"] == rail))

    def _moved_text(self, moved):
        return f"; counters moved: {counters.describe(moved)}" if moved else ""

    def pair_verdict(self, verdict, fabric):
        """What the rounds condemn (fabricplan's verdict): the failed hosts, the failed
        rails, the suspect links and switches."""
        self._fail_hosts(verdict["failed_hosts"])
        names = fabric.names
        suspects = self._named_links(verdict, fabric)
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

    def _fail_hosts(self, failed_hosts):
        """Fail the hosts every rail of which failed, saying with whom and what that proves."""
        passed_somewhere = {h for h in self.names if any(p["passed"] for p in self.hosts[h]["pairs"])}
        for i in failed_hosts:
            h = self.names[i]
            failed = {p["partner"] for p in self.hosts[h]["pairs"] if not p["passed"]}
            proven = failed & passed_somewhere
            self._fail(h, f"between hosts: below {limit_text(self.pair_limit)} with "
                       + self._failed_with(h)
                       + (f"; {len(proven)} of {len(failed)} passed with other hosts" if proven
                          else "; none passed with another host to compare")
                       + self._moved_text(self.moved(h)))

    def _named_links(self, verdict, fabric):
        """The names of the links the verdict names (a failed host's own rails left out); a
        host's failed rail is also its verdict RAIL, with the reason."""
        drained = set(verdict["failed_hosts"])
        suspects = []
        for link in verdict["named"]:
            if link[0] == "nic" and link[1] in drained:
                continue
            if link[0] == "nic":
                h, rail = fabric.names[link[1]], link[2]
                nic = fabric.nics.get((link[1], rail))
                self.hosts[h]["rails_failed"].append(rail)
                self.hosts[h]["reasons"].append(
                    f"rail {rail}" + (f" ({nic})" if nic else "") + f": below "
                    f"{limit_text(self.pair_limit)} with {self._failed_with(h, rail)}; its "
                    f"other rails passed" + self._moved_text(self.moved(h, {nic} if nic else None)))
                if self.hosts[h]["verdict"] == "PASS":
                    self.hosts[h]["verdict"] = "RAIL"
            suspects.append(fabric.name(link))
        return suspects

    def job(self, gathered):
        """Test 3: the whole job's figure (the mean time of every rank), judged."""
        mean = dict(gathered[0], seconds=sum(r["seconds"] for r in gathered) / len(gathered))
        fig = figure(mean)
        self.doc["job"] = fig
        self.figures["job"] = [fig["busbw_GBps"]] if fig["busbw_GBps"] else []
        self.job_failed = thresholds.below(fig, self.limits.get("job"))
        return fig, mean

    def counter_warnings(self):
        """[(host, counters that moved)] for the hosts that passed all the same."""
        return [(h, counters.describe(moved)) for h in self.names
                for moved in [self.moved(h)] if moved and self.hosts[h]["verdict"] == "PASS"]

    def _fail(self, host, reason):
        self.hosts[host]["verdict"] = "FAIL"
        self.hosts[host]["reasons"].append(reason)

    def failing(self):
        """The hosts to drain, and their hostlist (both into the document)."""
        failing = [h for h in self.names if self.hosts[h]["verdict"] == "FAIL"]
        hostlist = compress_hostlist(failing)
        self.doc.update(failing_hosts=failing, hostlist=hostlist)
        return failing, hostlist

    def failure(self):
        """check's failure message, or None when every host and link passed."""
        failing, hostlist, suspects = (self.doc["failing_hosts"], self.doc["hostlist"],
                                       self.doc.get("suspects", []))
        problems = ([f"{len(failing)} {plural(len(failing), 'host')} failed: {hostlist}"]
                    if failing else []) + \
            ([f"{len(suspects)} suspect {plural(len(suspects), 'link')} or "
              f"{plural(len(suspects), 'switch', 'switches')}: " + "; ".join(suspects)]
             if suspects else []) + \
            ([f"the whole job: {self.job_failed}"] if self.job_failed else [])
        return "check FAILED: " + "; ".join(problems) if problems else None

"""`check`'s limits for each test (--expect FILE, --baseline RESULT, or a share of the
median) and why a figure misses them."""
from statistics import median

from ..errors import UsageError
from ..results import numbers
from ..results.document import finite, parse

TESTS = ("intra", "pair", "job")
LIMITS = ("min_busbw_GBps", "max_latency_us")
RELATIVE = 0.8          # relative mode: fail below this share of the median host or pair


def read_expect(path):
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


def relative(values, what, few):
    """RELATIVE x the median `what` (few: what decides when too few say which is slow)."""
    known = [v for v in values if v is not None]
    return {"min_busbw_GBps": RELATIVE * median(known) if known else None,
            "source": f"{RELATIVE:g} x the median {what}" + (
                "" if len(values) >= 3 else f" of {len(values)}, too few to say which is slow: {few}")}


def below(figure, limits):
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


def baseline_limits(doc, path, collective, size, ranks_per_host, world, share, sizes=()):
    """Limits from an earlier `check`, or a run or nccl-tests result of the whole job or one
    host (sizes: the size aligned for the ranks); UsageError for one of something else."""
    where = f"--baseline {path}"
    if doc.get("command") == "check" and isinstance(doc.get("check"), dict):
        c = doc["check"]
        cfg = c.get("config") if isinstance(c.get("config"), dict) else {}
        figures = c.get("figures") if isinstance(c.get("figures"), dict) else {}
        if not cfg:
            raise UsageError(f"{where}: a check result without its config (collective, size, "
                             f"ranks per host)")
        theirs = (cfg.get("collective"), cfg.get("size"), cfg.get("ranks_per_host"))
        if theirs != (collective, size, ranks_per_host):
            raise UsageError(f"{where}: it checked {theirs[0]} at {theirs[1]} bytes with "
                             f"{theirs[2]} ranks per host; this check runs {collective} at {size} bytes with "
                             f"{ranks_per_host} ranks per host")
        figs = {t: [x for x in figures[t] if finite(x) and x > 0] for t in TESTS
                if isinstance(figures.get(t), list)}
        return ({t: {"min_busbw_GBps": share * median(f)} for t, f in figs.items() if f},
                None if cfg.get("world") == world else "job")
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

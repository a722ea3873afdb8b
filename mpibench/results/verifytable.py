"""`verify`'s table: check, figure, reference, ratio (with its confidence interval where
it has one), verdict; then one line per check that did not pass, with its reason."""
from tabulate import tabulate


def _ratio(c):
    if c["ratio"] is None:
        return ""
    ci = c.get("interval")
    return f"{c['ratio']:.3f}" + (f" ({ci[0]:.3f}-{ci[1]:.3f})" if ci else "")


def lines(checks):
    table = tabulate([[c["check"], c["figure"], c["reference"], _ratio(c), c["verdict"]]
                      for c in checks],
                     headers=["check", "figure", "reference", "ratio", "verdict"],
                     disable_numparse=True)
    out = table.splitlines()
    notes = [f"# {c['verdict']} {c['check']}: {c['reason']}" for c in checks
             if c["reason"] and c["verdict"] not in ("PASS",)]
    return out + notes

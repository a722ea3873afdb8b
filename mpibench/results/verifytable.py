"""`verify`'s table: check, figure, reference, ratio, verdict; then one line per check
that did not pass, with its reason."""
from tabulate import tabulate


def lines(checks):
    table = tabulate([[c["check"], c["figure"], c["reference"],
                       "" if c["ratio"] is None else f"{c['ratio']:.3f}", c["verdict"]]
                      for c in checks],
                     headers=["check", "figure", "reference", "ratio", "verdict"],
                     disable_numparse=True)
    out = table.splitlines()
    notes = [f"# {c['verdict']} {c['check']}: {c['reason']}" for c in checks
             if c["reason"] and c["verdict"] not in ("PASS",)]
    return out + notes

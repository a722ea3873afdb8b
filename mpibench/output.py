"""Rank 0's live output: the header, each row as soon as it is measured, per-host
tables, the summary, and the JSON/CSV files rewritten after every row."""
import datetime
import sys

from . import __version__, tables
from .results import ResultFile, render_csv, render_json


def now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


class RunOutput:
    def __init__(self, session, command, args, json_path=None, csv_path=None):
        self.s = session
        self.files = []
        if json_path:
            self.files.append(ResultFile(json_path, render_json))
        if csv_path:
            self.files.append(ResultFile(csv_path, render_csv))
        self.doc = {"version": 1, "tool": "mpibench", "mpibench_version": __version__,
                    "command": command, "start_time": now(), "end_time": None,
                    "complete": False, "argv": sys.argv[1:], "args": _jsonable(vars(args)),
                    "results": [], "hosts": [], "notes": []}
        self.trials = None   # a trials.Collector when run --trials K > 1 merges repeated rows

    def say(self, text):
        self.s.out(text)

    def note(self, text):
        """A line for the reader that also belongs in the results file."""
        self.s.out(f"# {text}")
        self.doc["notes"].append(text)
        self.flush()

    def announce_files(self):
        for f in self.files:
            if f.renamed:
                self.say(f"# {f.requested} exists: writing {f.path} instead (never overwritten)")
            else:
                self.say(f"# writing {f.path}")

    def set(self, **items):
        self.doc.update(items)
        self.flush()

    def add_row(self, row):
        self.say(tables.row_line(row))
        if self.trials:
            self.trials.add(self.doc["results"], row)
        else:
            self.doc["results"].append(row)
        self.flush()

    def add_hosts(self, coll, dt, op, size, c, mode, analysis):
        entry = {"collective": coll.name, "size": size, "type": dt.label, "dtype": dt.name,
                 "redop": op, "mode": mode, "symmetric": not coll.rooted,
                 "bw_bytes": coll.bw_bytes(c, dt.size, self.s.size),
                 "busbw_factor": coll.busbw_factor(self.s.size), **analysis}
        for line in tables.host_section(entry):
            self.say(line)
        self.doc["hosts"].append(entry)
        self.flush()

    def finish(self, complete=True):
        self.doc["end_time"] = now()
        self.doc["complete"] = complete
        self.flush()

    def flush(self):
        for f in self.files:
            f.write(self.doc)


def _jsonable(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[k] = v
        elif isinstance(v, (list, tuple)):
            out[k] = [x if isinstance(x, (str, int, float, bool)) else str(x) for x in v]
        else:
            out[k] = str(v)
    return out

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

    def add_row(self, row, line=None):
        """Print the row (nccl-tests' format unless a line is given) and record it."""
        self.say(tables.row_line(row) if line is None else line)
        self.doc["results"].append(row)
        self.flush()

    def add_hosts(self, coll, dt, op, size, c, mode, analysis):
        bw_bytes = coll.bw_bytes(c, dt.size, self.s.size)
        factor = coll.busbw_factor(self.s.size)
        symmetric = not coll.rooted
        self.say(f"#\n# {coll.name} per host at {tables.format_size(size)} ({dt.name}, "
                 f"{'in' if mode == 'in' else 'out-of'}-place, {analysis['iterations']} iterations, "
                 f"each after a barrier):")
        for line in tables.host_table(analysis, bw_bytes, factor).splitlines():
            self.say("#  " + line)
        for line in tables.straggler_lines(analysis, size, symmetric):
            self.say(line)
        self.doc["hosts"].append({"collective": coll.name, "size": size, "type": dt.label,
                                  "redop": op, "mode": mode, "symmetric": symmetric,
                                  "bw_bytes": bw_bytes, "busbw_factor": factor, **analysis})
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

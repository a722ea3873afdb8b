"""Where the engine's figures go on rank 0 during a run: rows and settings to the results
output as they are; each per-host probe through the straggler analysis first."""
from . import stragglers


class Sink:
    def __init__(self, out, hosts):
        self.out = out          # a results.output.RunOutput
        self.hosts = hosts      # host of every rank

    def __getattr__(self, name):        # set, table_header, add_row: the output's own
        return getattr(self.out, name)

    def add_probe(self, coll, dt, op, size, c, mode, times, margin):
        analysis = stragglers.analyze(self.hosts, times, margin=margin)
        self.out.add_hosts(coll, dt, op, size, c, mode, analysis)

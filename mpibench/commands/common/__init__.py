"""What several commands share, below them all (commands never import one another).

options holds the argument types every command parser uses (sizes, counts, --backend);
classic holds what allreduce, latency, flagsync and demo share.

May import: every stage (launch .. analysis); never a command module.
"""

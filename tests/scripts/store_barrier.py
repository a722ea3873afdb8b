"""The side channel's barrier under torchrun (no MPI: a TCPStore), timed per rank.

Each round one rank arrives late (a 20 ms nap, the rank taking turns); every rank notes
its arrival and exit on the host's monotonic clock (one clock for every process of a
host). Rank 0 prints one line per barrier kind: its name, the rounds, the median and
largest spread of exit times across ranks, and how many exits came before the last
arrival (0 for a barrier that holds). "sequential gets" is the barrier the side channel
had before its counter: every rank sets its key, then gets all ranks' keys one by one.
"""
import os
import statistics
import sys
import time

from mpibench.launch import bootstrap, launcher

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
place = launcher.detect(os.environ)
comm = bootstrap.connect(place).comm


def timed(barrier):
    got = []
    barrier()
    for k in range(ROUNDS):
        if k % comm.size == comm.rank:
            time.sleep(0.02)
        arrive = time.monotonic()
        barrier()
        got.append((arrive, time.monotonic()))
    return comm.gather(got, root=0)


def sequential_gets():
    tag = comm._next()
    comm.store.set(f"{tag}/{comm.rank}", b"")
    for r in range(comm.size):
        comm.store.get(f"{tag}/{r}")


for name, barrier in (("sequential gets", sequential_gets), (comm.barrier_kind, comm.barrier)):
    told = timed(barrier)
    if comm.rank == 0:
        spreads, early = [], 0
        for k in range(ROUNDS):
            last_in = max(t[k][0] for t in told)
            exits = [t[k][1] for t in told]
            spreads.append(max(exits) - min(exits))
            early += sum(e < last_in for e in exits)
        print(f"barrier={name!r} rounds={ROUNDS} median_spread_us={statistics.median(spreads) * 1e6:.0f} "
              f"max_spread_us={max(spreads) * 1e6:.0f} early_exits={early}", flush=True)

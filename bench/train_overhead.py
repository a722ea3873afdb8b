"""What mpibench adds to a training step: its timed DDP step against a bare DDP loop.

    mpirun -np 2 python bench/train_overhead.py [--rounds 7] [--steps 5] [--model tiny] [--quick]

--quick (seconds, for CI): 2 rounds of 2 steps.

In one job, on the same ranks and process group: mpibench's path (training.Trainer: the
model, AdamW, DDP, and Trainer.timed around the synced step, each step after a barrier,
with a device sync) and a hand-written loop (`zero_grad; loss = ddp(x, y); backward;
step` on a second DDP copy of the same model and batches, timed as one block with
perf_counter). The two alternate, order swapped each round, so that the machine's noise
falls on both alike. Per round each side's time per step is each rank's mean over its
steps, of the slowest rank; the ratio mpibench / bare per round, and its median, are
printed. Target: a median at most 1.02.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def bare_loop(ddp, opt, data, steps, perf, sync):
    """The loop a user would write: steps back to back, one timer around them."""
    t0 = perf()
    for k in range(steps):
        x, y = data[k % len(data)]
        opt.zero_grad(set_to_none=False)
        loss = ddp(x, y)
        loss.backward()
        opt.step()
    sync()
    return (perf() - t0) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=5, help="steps per side per round")
    p.add_argument("--model", default="tiny")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--quick", action="store_true", help="seconds, not minutes: 2 rounds of 2 steps")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.steps = 2, 2

    from mpibench.launch import bootstrap, launcher
    from mpibench.measure import model
    from mpibench.measure.training import Trainer
    session = bootstrap.start(launcher.detect(os.environ), backend="auto")
    shape = model.shape(args.model)
    mine = Trainer(session, args.model, shape, batch=args.batch, parallel="ddp", bucket_mb=25.0,
                   device=session.device)
    session.agree(mine.fit_error(), code=1)
    mine.wrap()

    import torch
    from torch.nn.parallel import DistributedDataParallel
    net = model.build(shape, session.device)
    ids = [session.device.index] if mine.cuda else None
    bare = DistributedDataParallel(net, device_ids=ids, bucket_cap_mb=25.0)
    bare_opt = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.1, foreach=True)
    barrier, perf = session.comm.polite_barrier, time.perf_counter
    sync = mine._sync

    def harness():
        return [mine.timed(mine.synced, k, barrier)[0] for k in range(args.steps)]

    def hand():
        return bare_loop(bare, bare_opt, mine.data, args.steps, perf, sync)

    hand()
    harness()       # warm-up of both (DDP rebuilds its buckets after the first step)
    session.out(f"# {session.size} ranks, {session.backend}, model "
                f"{model.describe(args.model, shape)}, batch {args.batch}, {args.steps} steps "
                f"per side per round")
    session.out("# round   mpibench ms/step   bare ms/step   ratio")
    ratios = []
    for r in range(args.rounds):
        got = {}
        for side in (("mpibench", "bare") if r % 2 == 0 else ("bare", "mpibench")):
            barrier()
            got[side] = harness() if side == "mpibench" else hand()
        # the same reduction on both sides: each rank's mean step, then the slowest rank
        ours = max(session.comm.allgather(statistics.mean(got["mpibench"])))
        bare_s = max(session.comm.allgather(got["bare"]))
        ratios.append(ours / bare_s)
        session.out(f"  {r + 1:5d}   {ours * 1e3:16.1f}   {bare_s * 1e3:12.1f}   {ratios[-1]:.3f}")
    session.out(f"# median ratio over {args.rounds} rounds: {statistics.median(ratios):.3f} "
                f"(mpibench's timed step / bare DDP loop; target <= 1.02)")
    session.close()


if __name__ == "__main__":
    main()

"""mpibench train: what the network costs a data-parallel training step."""
import argparse
import math
from collections import Counter
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Tuple, cast

from ..diagnose import rankfacts, stragglers
from ..errors import Exit, UsageError
from ..launch import faults
from ..launch.session import Session
from ..launch.watchdog import TIMED_LOOP
from ..measure import model
from ..measure.backends import make as make_backend
from ..measure.backends.torchdist import TorchBackend
from ..measure.collectives import REGISTRY
from ..measure.dtypes import parse_dtypes
from ..measure.engine import Engine, Plan
from ..measure.modes import MODE_KEYS
from ..measure.training import PARALLEL, Trainer, fsdp_unsupported
from ..results import inputs, reader, trainfigures, traintext
from ..results.output import RunOutput, open_output
from ..results.schema import Doc, Train
from .common import guard, options

HELP = "time data-parallel training steps of a GPT-style model: what communication costs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default=None, metavar="NAME",
                   help=f"the model: {', '.join(model.PRESETS)} (default tiny on CPUs, gpt2 on GPUs)")
    for field in model.FIELDS:
        p.add_argument(f"--{field}", type=options.at_least(1), default=None, metavar="N",
                       help=f"override the preset's {field}")
    p.add_argument("--batch", type=options.at_least(1), default=4, metavar="N",
                   help="sequences per rank per step (default 4)")
    p.add_argument("--parallel", choices=PARALLEL, default="ddp",
                   help="ddp (DistributedDataParallel), fsdp (FSDP2 fully_shard per block) or "
                        "none (each rank alone: compute only) (default ddp)")
    p.add_argument("--bucket-mb", type=options.positive_float, default=25.0, metavar="MB",
                   help="DDP's bucket_cap_mb (default 25, torch's)")
    p.add_argument("-n", "--steps", type=options.at_least(1), default=10, metavar="N",
                   help="timed steps of each kind (default 10)")
    p.add_argument("-w", "--warmup", type=options.at_least(0), default=3, metavar="N",
                   help="warm-up steps of each kind before timing (default 3)")
    p.add_argument("--alone-iters", type=options.at_least(0), default=10, metavar="N",
                   help="iterations of the step's collectives timed alone; 0 = off (default 10)")
    p.add_argument("--scale-from", metavar="FILE",
                   help="a train result of the same model with fewer ranks or hosts: prints "
                        "the speedup and scaling efficiency against it")
    options.add_min_share(p, "a host or rank is slow when its speed in most iterations is",
                          "the median's")
    guard.add_timeout(p, "a training step, or one phase", None, f"{guard.DEFAULT_TIMEOUT:g} s")
    options.add_json(p)
    p.add_argument("--csv", metavar="PATH",
                   help="write the collectives timed alone, one line per size (never overwrites)")
    options.add_backend(p, choices=options.AUTO_AND_TORCH_BACKENDS)


def _shape(args: argparse.Namespace, preset: str) -> model.Shape:
    return model.shape(preset, **{f: getattr(args, f) for f in model.FIELDS})


def check_args(args: argparse.Namespace) -> None:
    """Input errors that need no rank (without --preset, execute checks the shape: it depends
    on the device)."""
    if args.preset or (args.hidden and args.heads):
        _shape(args, args.preset or "tiny")
    if args.warmup > args.steps:
        raise UsageError(f"--warmup {args.warmup} is larger than --steps {args.steps}")


def load_baseline(path: str, shape: model.Shape, size: int) -> Doc:
    """The baseline document, or UsageError (the same on every rank)."""
    doc = cast(Doc, reader.load(path))
    if doc.get("command") != "train":
        raise UsageError(f"--scale-from {path}: a '{doc.get('command', '?')}' result, not a "
                         f"train result")
    train = doc["train"]
    if train.get("summary") is None or not doc.get("world"):
        raise UsageError(f"--scale-from {path}: its run ended before the timed steps were done")
    theirs = {k: train["model"][k] for k in model.FIELDS}
    if theirs != asdict(shape):
        raise UsageError(f"--scale-from {path}: another model ({_fields(theirs)}) than this "
                         f"run's ({_fields(asdict(shape))})")
    if doc["world"]["size"] > size:
        raise UsageError(f"--scale-from {path}: it ran on {doc['world']['size']} ranks, more than "
                         f"this run's {size}: give the smaller run as the baseline")
    return doc


def _fields(d: Dict[str, Any]) -> str:
    return ", ".join(f"{k} {d[k]}" for k in model.FIELDS)


def execute(session: Session, args: argparse.Namespace) -> int:
    backend = make_backend(session, args.backend[0])
    preset = args.preset or ("gpt2" if backend.cuda else "tiny")
    shape = _shape(args, preset)
    base = inputs.on_rank0(session, args.scale_from,
                           lambda path: load_baseline(path, shape, session.size), "--scale-from") \
        if args.scale_from else None
    if args.parallel == "fsdp" and (reason := fsdp_unsupported(session.backend or "", backend.torch)):
        raise UsageError(f"--parallel fsdp: {reason}")
    out = open_output(session, "train", args)
    guard.arm(session, args.timeout or guard.DEFAULT_TIMEOUT, "start-up (every rank's device and versions)")
    records, versions = rankfacts.gather(session)
    trainer = Trainer(session, preset, shape, batch=args.batch, parallel=args.parallel,
                      bucket_mb=args.bucket_mb, device=session.device)
    train = {"model": {"preset": preset, **asdict(shape), "parameters": trainer.parameters},
             "parallel": args.parallel, "bucket_mb": args.bucket_mb,
             "batch_per_rank": args.batch, "precision": trainer.precision,
             "warmup": args.warmup, "timed": args.steps, "steps": [], "collectives": [],
             "summary": None, "hosts": None, "memory": [], "memory_kind": trainer.memory.kind,
             "replicas": None, "scaling": None}
    if session.rank == 0:
        assert out is not None
        out.say(traintext.header_line(train), traintext.watchdog_line(session.watch.timeout))
        rankfacts.describe(session, out, [backend.name], records, versions,
                           {"timeout": session.watch.timeout})
        out.announce_files()
        out.set(train=train)
    session.watch.arm("building the model and one local step")
    try:
        session.agree(trainer.fit_error(), code=1)      # it fits, or exit 1
    except Exit as exc:
        if out is not None:
            out.abandon(str(exc))       # the file says why it holds no steps
        raise
    session.watch.arm(f"wrapping the model ({args.parallel})")
    trainer.wrap()
    train = _timed_steps(session, out, trainer, train, args)
    session.watch.arm("peak memory and the replicas' check")
    gathered = session.comm.gather((trainer.memory.peak(), _replica_loss(session, trainer)), root=0)
    calls = _calls(trainer)
    alone = _time_alone(session, backend, out, calls, args.alone_iters)
    session.watch.disarm()
    replicas = _closing(session, out, trainer, dict(train, collectives=calls), gathered or [], alone,
                        base, args)["replicas"] if session.rank == 0 else None
    differ = bool(replicas and not replicas["agree"])
    return guard.verdict(session, "FAILED: the replicas differ after synced steps (see 'replicas')"
                         if differ else None)


def _timed_steps(session: Session, out: Optional[RunOutput], trainer: Trainer, train: Dict[str, Any],
                 args: argparse.Namespace) -> Dict[str, Any]:
    """The warm-up steps, then the timed ones (synced and unsynced, A/B then B/A), each
    gathered to rank 0, printed and written as it comes; train with its steps."""
    barrier = session.comm.polite_barrier
    kinds = [(name, fn) for name, fn in (("synced_s", trainer.synced), ("unsynced_s", trainer.unsynced))
             if fn]
    for k in range(args.warmup):
        session.watch.arm(f"warm-up step {k + 1} of {args.warmup}")
        for _, fn in kinds:
            trainer.timed(fn, k, barrier)
    if session.rank == 0:
        assert out is not None
        out.say(traintext.steps_title(train), traintext.STEP_HEADER)
    for k in range(args.steps):
        mine, losses = {}, []
        for name, fn in (kinds if k % 2 == 0 else kinds[::-1]):   # A/B, then B/A
            # TIMED_LOOP: the watchdog thread keeps off the CPU and MPI, and still times out
            session.watch.arm(f"timed step {k + 1} of {args.steps}, {name[:-2]}", TIMED_LOOP)
            mine[name], loss = trainer.timed(fn, k, barrier)
            losses.append((name, loss))
        session.watch.mark("gathering the step's times")
        loss = _finite(dict(losses).get("synced_s", losses[0][1]).item())
        gathered = session.comm.gather((mine, loss), root=0)
        if session.rank == 0:
            assert out is not None and gathered is not None
            rec = {"step": k + 1, "synced_s": None, "loss": [g[1] for g in gathered],
                   **{name: [g[0][name] for g in gathered] for name, _ in kinds}}
            train = dict(train, steps=train["steps"] + [rec])
            out.set(train=train)
            out.say(traintext.step_line(rec))
    return train


def _replica_loss(session: Session, trainer: Trainer) -> Optional[float]:
    """This replica's loss on the shared batch (None where not finite)."""
    shared = _finite(trainer.shared_loss())
    shift = faults.get("replica", session.rank)
    if shift and shared is not None:      # test switch: this replica's loss off by that share
        shared *= 1 + float(shift)
    return shared


def _closing(session: Session, out: Optional[RunOutput], trainer: Trainer, train: Dict[str, Any],
             gathered: List[Tuple[Optional[int], Optional[float]]], alone: Dict[Tuple[str, int], float],
             base: Optional[Doc], args: argparse.Namespace) -> Dict[str, Any]:
    """Rank 0: the slow hosts, the figures, memory, replicas and scaling, printed and
    written; train complete."""
    assert out is not None
    analysis_of = "synced_s" if trainer.synced else "unsynced_s"
    times = [[s[analysis_of][r] for s in train["steps"]] for r in range(session.size)]
    analysis = stragglers.analyze(session.hosts, times, margin=options.share_margin(args.min_share))
    losses = [g[1] for g in gathered]
    summary = trainfigures.figures(cast(Train, train), session.size, alone)
    train = dict(train, summary=summary, hosts=analysis,
                 memory=[{"rank": r, "host": session.hosts[r], "peak_bytes": g[0]}
                         for r, g in enumerate(gathered)],
                 replicas=None if args.parallel == "none" else
                 trainfigures.replicas(losses, trainer.loss_rtol),
                 scaling=trainfigures.scaling(summary, session.size, base) if base else None)
    out.set(train=train)
    out.say(*traintext.closing_lines(train, session.size))
    out.finish()
    return train


def _finite(x: float) -> Optional[float]:
    """A loss as the JSON can hold it: None when it is not a finite number."""
    return x if math.isfinite(x) else None


def _calls(trainer: Trainer) -> List[Dict[str, Any]]:
    """One step's collectives: [{"collective", "size", "count"}], sizes in bytes."""
    calls = Counter(("all_reduce", size) for size in trainer.buckets())
    for size, gathers in trainer.fsdp_units():
        calls["all_gather", size] += gathers
        calls["reduce_scatter", size] += 1
    return [{"collective": c, "size": s, "count": n} for (c, s), n in calls.items()]


def _time_alone(session: Session, backend: TorchBackend, out: Optional[RunOutput],
                calls: List[Dict[str, Any]], iters: int) -> Dict[Tuple[str, int], float]:
    """{(collective, size): seconds} of each of the step's collectives timed alone, back
    to back, through the engine on the same process group ({} when not timed)."""
    if not calls or not iters or session.size < 2:
        return {}
    session.out(traintext.alone_title(iters))
    alone, sink = {}, stragglers.Sink(out, session.hosts) if out is not None else None
    for name in dict.fromkeys(c["collective"] for c in calls):     # in order, once each
        coll = REGISTRY[name]
        mode = "in" if name == "all_reduce" else "out"    # as DDP and FSDP2 call them
        plan = Plan(collectives=[coll], sizes=sorted({c["size"] for c in calls
                                                      if c["collective"] == name}),
                    dtypes=parse_dtypes("float32"), ops=["sum"], iters=iters,
                    warmup=min(2, iters), check=0, blocking=backend.default_blocking(),
                    modes=(mode,), probe_iters=0)
        Engine(session, backend, plan, sink).run()
        if session.rank == 0:
            assert out is not None
            for row in out.doc["results"]:
                if row["collective"] == name and row[MODE_KEYS[mode]]:
                    alone[(name, row["requested_size"])] = row[MODE_KEYS[mode]]["time_us"] / 1e6
    return alone

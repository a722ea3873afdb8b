"""What `run` prints around nccl-tests' rows: its header before them, its summary after."""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from tabulate import tabulate

from ..launch import torchenv
from ..launch.slurm import compress_hostlist
from ..measure import launchcost
from ..measure.backends.torchdist import TorchBackend
from ..measure.engine import Plan
from ..measure.modes import MODE_TEXT
from ..measure.sizes import format_bytes, format_size
from . import nccltests, numbers, published, tables
from .output import RunOutput


def settings(out: RunOutput, versions: Sequence[Dict[str, Optional[str]]], plan: Plan, *, average: str,
             blocking: Dict[str, int], modes: Dict[str, str], notes: Sequence[Optional[str]],
             clock: str, timeout: float, uncapped: Optional[float] = None) -> None:
    """The header's first lines. blocking, modes: {backend: its -z, what it does}; notes: lines
    or None; clock: what times each iteration with -I 1; uncapped: the deadline the largest
    row's traffic would have given, where the timeout is a cap below it."""
    sizes = plan.sizes
    step = f"{sizes[1] / sizes[0]:g}" if len(sizes) > 1 else "1"
    blocking_text = (str(plan.blocking) if len(set(blocking.values())) == 1
                     else ", ".join(f"{k} {v}" for k, v in blocking.items()))
    out.say(nccltests.version_line(versions))
    out.say(f"# mpibench run: {', '.join(c.name for c in plan.collectives)}")
    out.say(nccltests.settings_line(sizes, plan.warmup, plan.iters, plan.check, plan.graph))
    out.say(f"# sizes {format_size(sizes[0])} .. {format_size(sizes[-1])} (x{step}, "
            f"{len(sizes)} sizes)  dtype {','.join(d.name for d in plan.dtypes)}  "
            f"op {','.join(plan.ops)}  iters {plan.iters}  warmup {plan.warmup}  "
            f"check {plan.check}  blocking {blocking_text}  average {average}  graph {plan.graph}")
    for name, z in blocking.items():
        out.say(f"# -z {z}{f' ({name})' if len(blocking) > 1 else ''}: {modes[name]}")
    out.say(*filter(None, notes))
    if plan.per_iter:
        out.say(f"# per-iteration report: {clock} per iteration; i_* use the slowest rank in "
                f"each iteration" + (f"; summary skips the first {plan.per_iter_skip} iterations"
                                     if plan.per_iter_skip else ""))
    out.say(watchdog_line(timeout, uncapped))


def watchdog_line(timeout: float, uncapped: Optional[float] = None) -> str:
    """The row deadline; uncapped: what the largest row's traffic would have given instead."""
    return (f"# watchdog: a row that takes over {timeout:g} s is called hung (--timeout)" +
            (f"; capped: the largest row's traffic at 1 GB/s would take {uncapped:g} s, "
             f"--timeout {uncapped:g} allows it" if uncapped else ""))


def banner(backend: Optional[str] = None, trial: int = 0, trials: int = 0) -> str:
    """The line that opens a backend's sweep, or trial `trial` (from 1) of `trials`."""
    return "#\n# " + (f"======== backend {backend} ========" if backend else f"trial {trial} of {trials}")


def call_notes(out: RunOutput, missing: Sequence[Tuple[str, str, Sequence[str]]],
               notes: Sequence[Tuple[str, str, str]]) -> None:
    """The header's last lines. missing: (mode, why, collectives without that call) per backend
    and mode; notes: (backend, collective, text) where torch's call differs."""
    out.say(*(f"# {MODE_TEXT[mode]}: n/a for {', '.join(colls)} ({why})"
              for mode, why, colls in missing if colls))
    out.say(*(f"# {coll} ({name}): {text}" for name, coll, text in notes))
    if notes:
        out.set(call_notes=[{"backend": b, "collective": c, "note": t} for b, c, t in notes])


def blocking_wait_note(backends: Sequence[TorchBackend], environ: Mapping[str, str]) -> Optional[str]:
    """The header's line when torch's blocking wait (TORCH_NCCL_BLOCKING_WAIT or the older
    NCCL_BLOCKING_WAIT, as torch reads them) makes NCCL's p2p waits block the host."""
    on = torchenv.flag(torchenv.BLOCKING_WAIT, environ)
    if on and any(b.name == "nccl" for b in backends):
        return (f"# {on[0]}={on[1]}: point-to-point waits block the host, so -z 0 "
                "sendrecv behaves as -z 2 (each call waited for before the next)")
    return None


def buffer_memory(backends: Sequence[TorchBackend]) -> Dict[str, str]:
    """{backend: 'GPU' or 'host'}: where each backend's buffers live."""
    return {b.name: "GPU" if getattr(b, "cuda", False) else "host" for b in backends}


def memory_note(backends: Sequence[TorchBackend]) -> Optional[str]:
    """The header's line when the backends' buffers live in different memories (GPU, host)."""
    where = buffer_memory(backends)
    if len(set(where.values())) < 2:
        return None
    return ("# buffers: " + ", ".join(f"{n} in {w} memory" for n, w in where.items())
            + "; MPI gets host buffers (CUDA-aware MPI is not used), so the backends are "
              "compared on different data paths, not only different libraries")


def launch_header(out: RunOutput, launch: Dict[str, Dict[str, float]], graph: int) -> None:
    marked = ("with -G a graph launch starts every captured call, so no row is marked launch-bound"
              if graph else f"rows within {launchcost.LAUNCH_BOUND_FACTOR:g}x of their collective's are "
              f"launch-bound (summary, JSON 'launch_bound'): -G avoids it")
    out.say(*(f"# launch cost ({name}), us per call, the host's time to start one call at the smallest "
              f"size ({launchcost.LAUNCHES} calls without waiting, slowest rank): "
              + ", ".join(f"{c} {numbers.us(s)}" for c, s in costs.items()) + f"; {marked}"
              for name, costs in launch.items()))
    if launch:
        out.set(launch_cost_us={b: {c: s * 1e6 for c, s in costs.items()} for b, costs in launch.items()})


def room_header(out: RunOutput, rooms: Dict[str, Optional[Dict[str, Any]]]) -> None:
    """What the GPU buffers leave free for NCCL, and -e where it was lowered for that."""
    known = {name: r for name, r in rooms.items() if r is not None}
    for name, r in known.items():
        text = (f"-e lowered from {format_size(r['maxbytes'])} to {format_size(r['lowered_to'])}"
                if r["lowered_to"] else f"-e {format_size(r['maxbytes'])} fits")
        out.say(f"# device memory ({name}): {text}, leaving {format_bytes(r['reserve_bytes'])} "
                f"of the smallest GPU's {format_bytes(r['device_bytes'])} to NCCL's own buffers, "
                f"graphs and the check (as nccl-tests: 1 GiB per 16 GiB, at most 4, plus 1 GiB)")
    if known:
        out.set(device_memory=known)


def graph_buffers_header(out: RunOutput, buffers: Dict[str, Dict[str, Any]]) -> None:
    """-G: where the buffers come from, since NCCL's zero-copy NVLS and CollNet take
    ncclMemAlloc memory registered during capture; whether NCCL registered them is not
    checked (nccl-tests allocates with ncclMemAlloc in every run, mpibench with -G only)."""
    for name, b in buffers.items():
        text = ("ncclMemAlloc (torch.cuda.MemPool over the NCCL process group's allocator), "
                "which NCCL can register during graph capture; whether it did is not checked. "
                "nccl-tests allocates with ncclMemAlloc in every run, mpibench with -G only"
                if b["allocator"] == "ncclMemAlloc" else
                f"torch's caching allocator ({b['reason']}): not ncclMemAlloc memory, which "
                "NCCL's zero-copy NVLS and CollNet take; NCCL may copy through its own "
                "buffers where nccl-tests' would not")
        out.say(f"# -G buffers ({name}): {text}")
    if buffers:
        out.set(graph_buffers=buffers)


def memory_summary(hosts: Sequence[str], out: RunOutput, memory: Sequence[Dict[str, Any]]) -> None:
    """Every rank's peak memory into the document, and the largest (host, device) in one line."""
    out.set(memory=[{"rank": r, "host": hosts[r], **m} for r, m in enumerate(memory)])
    peaks = {}          # field: (the rank of the largest, 'N bytes on rank R (host H)')
    for field in ("device_peak_bytes", "peak_rss_bytes"):
        if found := [(m[field], r) for r, m in enumerate(memory) if m.get(field) is not None]:
            value, rank = max(found)
            peaks[field] = (rank, f"{format_bytes(value)} on rank {rank} (host {hosts[rank]})")
    if peaks:
        rank, where = next(iter(peaks.values()))
        what = ("device memory (torch.cuda.max_memory_allocated)" if "device_peak_bytes" in peaks
                else "resident memory")
        rss = f"; peak host resident memory {peaks['peak_rss_bytes'][1]}" if len(peaks) == 2 else ""
        out.say(f"# peak {what}: {where}, of which buffers {format_bytes(memory[rank]['buffer_bytes'])}{rss}")


def per_rank_table(hosts: Sequence[str], out: RunOutput) -> None:
    several = len({row["backend"] for row in out.doc["results"]}) > 1
    rows = [[f"{row['collective']} ({row['backend']})" if several else row["collective"], row["size"],
             row["type"], key.replace("_", "-")] + [f"{t:.1f}" for t in times]
            for row in out.doc["results"] for key, times in row["per_rank_time_us"].items()]
    out.say("#\n# per-rank time (us), host:rank", tabulate(
        rows, headers=["collective", "size", "type", "mode"] + [f"{h}:{r}" for r, h in enumerate(hosts)]))


def trials_summary(out: RunOutput, trials: int, unstable_share: float) -> None:
    out.say(f"#\n# median of {trials} trials per row; spread over the trials; a row is "
            f"UNSTABLE when its times span more than {unstable_share:.0%} of their median")
    out.say(*tables.trials_table(out.doc["results"]))
    if unstable := sum(1 for _, _, m in tables.measured(out.doc["results"]) if m.get("unstable")):
        out.say(f"# {numbers.counted(unstable, 'row-mode')} UNSTABLE: "
                f"differences smaller than their spread are noise")


def launch_bound(out: RunOutput) -> None:
    """The summary's line on the row-modes within reach of their launch cost."""
    if bound := [row["size"] for row, _, m in tables.measured(out.doc["results"]) if m.get("launch_bound")]:
        out.say(f"# {'Launch-bound rows':<20s} : {numbers.counted(len(bound), 'row-mode')}"
                f" ({format_size(min(bound))} .. {format_size(max(bound))}): "
                + launchcost.LAUNCH_BOUND_NOTE)


def path_header(out: RunOutput, paths: Dict[str, Any], pub: Optional[Dict[str, Any]] = None) -> None:
    """Each host's path limits (inside the host, between hosts), what is unknown and why, the
    links below their rating (diagnose/pathlimits.py's section); the platform published figures
    are matched to."""
    alike: Dict[str, List[str]] = {}          # hosts with the same limits share a line
    for host, p in paths["hosts"].items():
        sides = [f"{what} " + (f"{lim['name']} = {lim['GBps']:.1f} GB/s" if lim else "unknown")
                 for what, lim in (("inside the host", p["intra"]), ("between hosts", p["inter"]))]
        text = ", ".join(sides) + "".join(f"; unknown: {u}" for u in p["unknown"])
        alike.setdefault(text, []).append(host)
    for text, hosts in alike.items():
        out.say(f"# path limits {compress_hostlist(hosts)} (each way, per GPU inside, per host between): "
                + text)
    out.say(*(f"# {f['host']}: {'ERROR ' if f['severity'] == 'error' else 'WARNING '}{f['text']}"
              for f in paths["findings"]))
    out.set(path_limits=paths)
    if pub is not None:
        out.say(f"# platform for published figures: {published.platform_text(pub['platform'])}")
        out.set(published=pub)

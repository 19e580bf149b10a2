"""``mlaprof run --device cuda``: real FULL-graph capture of N layers per capture size.

Per capture size: a child process tries the capture first (naming the offender if it breaks);
on success the parent captures the serving graph (clean, timed around its replay) and an
instrumented twin (an external timing event before every layer and after the last) in private
memory pools, calibrates the event-node cost, and then serves the steps: the serving graph on
most steps, the twin on a sampled few (its step time corrected, its per-layer times recorded).
When capture fails the steps run eagerly (PIECEWISE-style: attention outside any graph) with
timing events around each layer, so the cost of not capturing is measured.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlaprof.backends.registry import device_decides_splits, split_arch, use_device_splits
from mlaprof.errors import MlaprofError
from mlaprof.gpu.hostwork import HostQueue, RowBuffer, analysis_items
from mlaprof.gpu.offender import CaptureOutcome
from mlaprof.gpu.timeline import LAYER_MARK, StepProfile
from mlaprof.gpu.timing import Calibration, calibrate, layer_times, sample_schedule, twin_step_ns
from mlaprof.recording import (
    TWIN,
    attempt_memory_row,
    capture_row,
    event_row,
    layer_row,
    memory_row,
    step_row,
)
from mlaprof.splits.policies import POLICIES, SplitInput, mlaprof_triton_cap
from mlaprof.sync_kinds import OPS

if TYPE_CHECKING:
    from mlaprof.metadata import BatchShape, VerifyMetadata
    from mlaprof.scenario import Scenario
    from mlaprof.store.writer import RunWriter

Progress = Callable[[int, int], None]
DEFAULT_SAMPLE_RATE = 1 / 16
TIMELINE_STEPS = 2  # last steps of a run profiled for a kernel timeline
CALIBRATION_REPLAYS = 30


def scenario_splits(
    sc: Scenario,
    meta: VerifyMetadata,
    units: int,
    on_device: bool = False,
    arch: str | None = None,
) -> int:
    """S the scenario's policy gives for this metadata (as the run's min_kv mode passes it);
    mlaprof's own policy where the scenario's cannot run this shape. ``on_device``: the kernel
    picks S per row from the KV lengths at replay, so this is only the grid's cap (independent
    of the lengths the graph is captured with). ``arch``: the GPU's (``sm_90`` on Hopper)."""
    x = SplitInput(
        num_reqs=meta.num_reqs,
        qlen=meta.qlen,
        heads=sc.heads,
        min_kv_seq_len=meta.min_kv_seq_len,
        max_seq_len=meta.max_seq_len,
        total_kv=sum(meta.host_seq_lens),
        units=units,
        arch=arch,
    )
    if on_device:
        return mlaprof_triton_cap(x)
    try:
        return POLICIES[sc.policy].splits(x)
    except MlaprofError:
        return POLICIES["mlaprof-triton"].splits(x)


def run_cuda(
    scenario: Scenario,
    backend_name: str,
    writer: RunWriter,
    progress: Progress | None = None,
    *,
    sample_rate: float = DEFAULT_SAMPLE_RATE,
    probe: bool = True,
    calibration_replays: int = CALIBRATION_REPLAYS,
    analysis_every: int = 1,
    timeline_steps: int = TIMELINE_STEPS,
    collective: Callable[[Any], None] | None = None,
) -> None:
    """Run ``scenario`` on the GPU through ``backend_name`` and record it into ``writer``.

    ``timeline_steps``: the last k steps run under ``torch.profiler`` and their kernels are
    recorded with device timestamps (timing label ``*-profiled``, left out of step timing).

    ``sample_rate``: share of steps replayed through the instrumented twin (per-layer times).
    ``analysis_every``: record the split/padding analysis every k-th step (and on twin steps);
    1 (default) records every step. Its host cost (~3 ms a step in Python) is hidden behind the
    replay while the replay is longer; raise k for short steps."""
    if analysis_every < 1:
        raise MlaprofError(f"analysis_every must be >= 1, got {analysis_every}")
    if timeline_steps < 0:
        raise MlaprofError(f"timeline_steps must be >= 0, got {timeline_steps}")
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is a hard dependency
        raise MlaprofError(f"torch is not importable: {e}") from None
    if not torch.cuda.is_available():
        raise MlaprofError("--device cuda needs a CUDA (or ROCm) GPU; none is visible")
    from mlaprof.gpu.session import CudaSession

    sc = scenario
    units = torch.cuda.get_device_properties(0).multi_processor_count
    arch = split_arch(backend_name, torch.device("cuda"))
    on_device = device_decides_splits(backend_name, sc.policy)
    sess = CudaSession(
        sc,
        backend_name,
        lambda step, m, sh: scenario_splits(sc, m, units, on_device, arch),
        seed=sc.seed,
    )
    use_device_splits(sess.backend, backend_name, sc.policy)
    sess.collective = collective  # TP ranks: an all-reduce after each layer, captured with it
    _record_env(writer, torch)
    captured: dict[int, Calibration] = {}
    fallback = sc.graph_mode != "FULL"
    if sc.graph_mode == "FULL":
        outcome = _probe(sc, backend_name, sess) if probe else CaptureOutcome("captured")
        if outcome.status != "captured":
            fallback = True
            _record_failed_capture(writer, sess, outcome)
        else:
            for grp in sess.groups.values():
                captured[grp.num_reqs] = _capture_group(
                    writer, sess, grp, calibration_replays, torch, timeline_steps == 0
                )
    # profiled steps come last and leave at least one timed step
    first_profiled = sc.steps - min(timeline_steps, max(0, sc.steps - 1))
    if fallback:
        _run_eager(sc, backend_name, writer, sess, progress, torch, first_profiled)
    else:
        _run_graphs(
            sc,
            backend_name,
            writer,
            sess,
            captured,
            sample_rate,
            progress,
            torch,
            analysis_every,
            first_profiled,
        )


# -- capture -----------------------------------------------------------------------------------
def _probe(sc: Scenario, backend_name: str, sess: Any) -> CaptureOutcome:
    from mlaprof.gpu.probe import probe_in_child

    splits = {n: g.splits for n, g in sess.groups.items()}
    return probe_in_child(sc.to_dict(), backend_name, splits)


def _record_failed_capture(writer: RunWriter, sess: Any, outcome: CaptureOutcome) -> None:
    with writer.transaction():
        for grp in sess.groups.values():
            cap = capture_row(
                grp.capture_size,
                "FULL",
                "failed",
                outcome.message,
                fallback="PIECEWISE",
                op=outcome.op,
                layer=outcome.layer,
                location=outcome.location,
            )
            writer.add("captures", **cap)
            # the attempt's time; its bytes were not measured (it ran in the probe process), and
            # the steps then run eagerly: no PIECEWISE graph is captured
            writer.add("memory", **attempt_memory_row(grp.capture_size, outcome.capture_ns))
        for e in outcome.events or []:
            if e.get("kind") in OPS:
                writer.add(
                    "syncs",
                    step=e.get("step"),
                    layer=e.get("layer"),
                    kind="capture-error" if _same(e, outcome) else e.get("kind"),
                    op=e.get("op"),
                    location=e.get("location"),
                    function=e.get("function"),
                    detail=e.get("detail"),
                )


def _same(e: dict[str, Any], o: CaptureOutcome) -> bool:
    return (e.get("op"), e.get("layer"), e.get("location")) == (o.op, o.layer, o.location)


def _capture_group(
    writer: RunWriter, sess: Any, grp: Any, replays: int, torch: Any, launch_rows: bool = True
) -> Calibration:
    """Capture the group's serving graph and twin, calibrate, record memory. ``launch_rows``:
    record each layer's kernels as launched (grid, S; no timestamps) where no kernel timeline
    will be recorded."""
    sess.load_step(grp.first_step)
    sess.warmup(grp)
    grp.serving = sess.capture(grp)
    grp.twin = sess.capture(grp, instrumented=True)
    serving, twin = [], []
    for _ in range(replays):  # side by side, alternating, so drift hits both alike
        serving.append(_timed_replay(grp.serving.graph, torch))
        twin.append(_timed_replay(grp.twin.graph, torch))
    cal = calibrate(serving, twin, sess.layers + 1)
    with writer.transaction():
        for mode, g in (("FULL", grp.serving), ("FULL" + TWIN, grp.twin)):
            m = g.memory
            row = memory_row(
                grp.capture_size,
                mode,
                m.pool_bytes,
                m.allocator_bytes,
                m.driver_bytes,
                m.capture_ns,
            )
            writer.add("memory", **row)
        message = f"{sess.layers} layers in one graph, S = {grp.splits}"
        writer.add("captures", **capture_row(grp.capture_size, "FULL", "captured", message))
        msg = f"event node {cal.event_ns / 1e3:.2f} us; twin +{cal.overhead * 100:.1f}%"
        data = cal.__dict__ | {"capture_size": grp.capture_size}
        writer.add("events", **event_row("mlaprof.gpu", "calibration", msg, data))
        if launch_rows:
            _record_kernels(writer, sess, grp)
    return cal


def _timed_replay(graph: Any, torch: Any) -> float:
    a = torch.cuda.Event(enable_timing=True)
    z = torch.cuda.Event(enable_timing=True)
    a.record()
    graph.replay()
    z.record()
    z.synchronize()
    return a.elapsed_time(z) * 1e6


def _record_kernels(writer: RunWriter, sess: Any, grp: Any) -> None:
    launch = getattr(sess.backend, "last_launch", None) or {}
    for layer in range(sess.layers):
        for stage in ("stage1", "stage2"):
            info = launch.get(stage)
            if not info:
                continue
            gx, gy, gz = (tuple(info["grid"]) + (1, 1, 1))[:3]
            bx, by, bz = (tuple(info["block"]) + (1, 1, 1))[:3]
            writer.add(
                "kernels",
                step=grp.first_step,
                layer=layer,
                name=f"mla_verify_{stage}",
                grid_x=gx,
                grid_y=gy,
                grid_z=gz,
                block_x=bx,
                block_y=by,
                block_z=bz,
                splits=info.get("splits"),
            )


# -- serving -----------------------------------------------------------------------------------
def _run_graphs(
    sc: Scenario,
    backend_name: str,
    writer: RunWriter,
    sess: Any,
    cals: dict[int, Calibration],
    rate: float,
    progress: Progress | None,
    torch: Any,
    analysis_every: int = 1,
    first_profiled: int | None = None,
) -> None:
    schedule = sample_schedule(sc.steps, rate)
    first_profiled = sc.steps if first_profiled is None else first_profiled
    a = torch.cuda.Event(enable_timing=True)
    z = torch.cuda.Event(enable_timing=True)
    queue = HostQueue()
    expect: dict[tuple[int, bool], float] = {}
    gc.freeze()  # as vLLM does after capture: collections scan only what the steps allocate
    try:
        for step in range(sc.steps):
            analyze = step % analysis_every == 0 or schedule[step]
            profiled = step >= first_profiled  # a kernel timeline, not a timed step
            with StepProfile(torch, profiled) as prof:
                serve_step(
                    sc,
                    backend_name,
                    writer,
                    sess,
                    cals,
                    step,
                    schedule[step] and not profiled,
                    (a, z),
                    queue,
                    analyze,
                    None if profiled else expect,
                    profiled=profiled,
                )
            if profiled:
                grp = sess.group_of(step)
                device_s = getattr(sess.backend, "device_splits", False)
                _record_timeline(writer, prof, step, queue, None if device_s else grp.splits)
            if progress:
                progress((step + 1) * sess.layers, sc.steps * sess.layers)
        queue.drain()
    finally:
        gc.unfreeze()


DEADLINE_SHARE = 0.9  # host items must be expected to end within 90% of the replay's device time
MAX_BACKLOG = 512  # queued items beyond which a step drains them after its sync (host-bound run)


def serve_step(
    sc: Scenario,
    backend_name: str,
    writer: RunWriter,
    sess: Any,
    cals: dict[int, Calibration],
    step: int,
    twin: bool,
    events: tuple[Any, Any],
    queue: HostQueue | None = None,
    analyze: bool = True,
    expect: dict[tuple[int, bool], float] | None = None,
    deadline_share: float | None = DEADLINE_SHARE,
    profiled: bool = False,
) -> float:
    """One profiled step: refresh metadata, replay (serving graph, or the twin when sampled),
    run queued host work only while the GPU is busy and only items expected to end before the
    replay does, sync once, queue this step's records (committed together, one transaction).
    Without ``queue`` everything is written at once. ``expect``: smoothed device time per
    (capture size, twin), updated here; seeded from the calibration. ``deadline_share``: share
    of that time host items must end within (None: no deadline, items run while the GPU is
    busy). ``profiled``: the step runs under the profiler (its timing is labelled so).
    Returns the device time."""
    a, z = events
    grp = sess.load_step(step)
    g = grp.twin if twin else grp.serving
    cal = cals[grp.num_reqs]
    key = (grp.num_reqs, twin)
    expected = (expect or {}).get(key) or (cal.twin_ns if twin else cal.serving_ns)
    t_start = time.time_ns()
    t_launch = time.perf_counter_ns()
    a.record()
    g.graph.replay()
    z.record()
    # host work overlaps the replay (it only reads host values) and never outlasts it
    q = queue if queue is not None else HostQueue()
    shape: BatchShape = sess.shapes[step]
    holder: dict[str, Any] = {}
    rows = RowBuffer()
    if analyze:
        q.extend(analysis_items(rows, sc, step, sess.host_metas[step], shape, holder), "analysis")
    deadline = None if deadline_share is None else t_launch + deadline_share * expected
    q.run_while(lambda: not z.query(), deadline)
    z.synchronize()  # the engine's own per-step sync (sampling needs the logits)
    dur = a.elapsed_time(z) * 1e6
    if expect is not None:
        expect[key] = dur if key not in expect else expect[key] + 0.2 * (dur - expect[key])
    layers: list[float | None] = [None] * sess.layers
    if twin:
        t0 = g.events[0]
        stamps = [0.0] + [t0.elapsed_time(e) * 1e6 for e in g.events[1:]]
        layers = list(layer_times(stamps, cal.event_ns))
        dur = twin_step_ns(dur, cal)
    timing = "graph-replay-twin" if twin else "graph-replay"
    if profiled:
        timing = "graph-replay-profiled"
    splits = grp.splits

    def write() -> None:
        _write_step(
            writer,
            sc,
            backend_name,
            step,
            shape,
            splits,
            holder.get("main"),
            t_start,
            dur,
            layers,
            "FULL",
            timing,
            rows,
        )

    q.add(write, "write")
    if queue is None or len(q) > MAX_BACKLOG:
        q.drain()
    return dur


def eager_step_mode(run_mode: str, shape_mode: str) -> str:
    """The mode a step ran in outside a FULL graph: NONE where vLLM's dispatch sends its batch
    eager (above the largest kept capture size: the step's shape says so), else the run's mode,
    PIECEWISE where its FULL capture failed (vLLM's fallback)."""
    if shape_mode == "NONE":
        return "NONE"
    return "PIECEWISE" if run_mode == "FULL" else run_mode


def _run_eager(
    sc: Scenario,
    backend_name: str,
    writer: RunWriter,
    sess: Any,
    progress: Progress | None,
    torch: Any,
    first_profiled: int | None = None,
) -> None:
    """Attention outside any graph: per-layer timing events (cheap outside a graph)."""
    from mlaprof.probes.sync_checker import SyncChecker

    queue = HostQueue()
    watched: set[int] = set()  # capture sizes whose syncs were looked for
    for step in range(sc.steps):
        grp = sess.load_step(step)
        if grp.num_reqs not in watched:  # an untimed watched pass names the syncs per layer
            watched.add(grp.num_reqs)
            checker = SyncChecker()
            sess.forward_layers(grp, layer_ctx=lambda i, c=checker, s=step: c.region(i, s))
            torch.cuda.synchronize()
            # every sync of every layer (the probe only names the first one to break capture)
            writer.add_many("syncs", [e.to_row() for e in checker.events])
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(sess.layers + 1)]
        profiled = first_profiled is not None and step >= first_profiled
        shape = sess.shapes[step]
        mode = eager_step_mode(sc.graph_mode, shape.graph_mode)
        holder: dict[str, Any] = {}
        rows = RowBuffer()
        with StepProfile(torch, profiled) as prof:
            t_start = time.time_ns()
            sess.forward_layers(
                grp,
                hook=lambda i, ev=ev: ev[i].record(),
                layer_ctx=_layer_range(torch) if profiled else None,
            )
            queue.extend(analysis_items(rows, sc, step, sess.host_metas[step], shape, holder))
            queue.run_while(lambda e=ev[-1]: not e.query())
            ev[-1].synchronize()
        layers = [ev[i].elapsed_time(ev[i + 1]) * 1e6 for i in range(sess.layers)]
        dur = ev[0].elapsed_time(ev[-1]) * 1e6

        def write(
            step=step,
            shape=shape,
            holder=holder,
            t=t_start,
            d=dur,
            ls=layers,
            s=grp.splits,
            rows=rows,
            mode=mode,
            timing="eager-profiled" if profiled else "eager-events",
        ) -> None:
            _write_step(
                writer,
                sc,
                backend_name,
                step,
                shape,
                s,
                holder.get("main"),
                t,
                d,
                ls,
                mode,
                timing,
                rows,
            )

        queue.add(write)
        if profiled:
            _record_timeline(writer, prof, step, queue)
        if progress:
            progress((step + 1) * sess.layers, sc.steps * sess.layers)
    queue.drain()


def _layer_range(torch: Any) -> Callable[[int], Any]:
    """A profiler range per eager layer (the profiler draws it on the GPU too)."""
    return lambda i: torch.profiler.record_function(f"{LAYER_MARK}{i}")


def _record_timeline(
    writer: RunWriter, prof: StepProfile, step: int, queue: HostQueue, splits: int | None = None
) -> None:
    """The profiled step's kernels with device timestamps (after its own records); ``splits``:
    the S mlaprof's split kernels ran with, where the host decided it."""
    queue.drain()  # the step's record first: timelines belong to recorded steps
    recs = prof.records(step)
    for r in recs:
        if splits is not None and str(r["name"]).startswith("mla_verify_stage"):
            r["splits"] = splits
    if recs:
        writer.add_many("kernels", recs)
    msg = f"step {step}: {len(recs)} kernels from torch.profiler (durations include its cost)"
    data = {"step": step, "kernels": len(recs)}
    writer.add("events", **event_row("mlaprof.gpu", "kernel-timeline", msg, data))


def _write_step(
    writer: RunWriter,
    sc: Scenario,
    backend_name: str,
    step: int,
    shape: BatchShape,
    splits: int,
    main: Any,
    t_start: int,
    dur_ns: float,
    layers: list[float | None],
    mode: str,
    timing: str,
    rows: RowBuffer | None = None,
) -> None:
    deserved = main.get("deserved") if main else None
    with writer.transaction():
        if rows is not None:  # the step's split and padding records
            rows.write_into(writer)
        offset = 0.0
        # per-layer rows only where layers were timed (twin replays, eager steps)
        for i, d in enumerate(layers if any(x is not None for x in layers) else []):
            row = layer_row(
                step,
                i,
                int(t_start + offset) if d is not None else None,
                int(d) if d is not None else None,
                None,
                splits,
                deserved,
            )
            writer.add("layers", **row)
            offset += d or 0.0
        writer.add(
            "steps", **step_row(step, shape, t_start, int(dur_ns), mode, backend_name, timing)
        )


def _record_env(writer: RunWriter, torch: Any) -> None:
    props = torch.cuda.get_device_properties(0)
    info = {"device": props.name, "units": props.multi_processor_count, "torch": torch.__version__}
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    msg = f"{props.name}, {props.multi_processor_count} units"
    writer.add("events", **event_row("mlaprof.gpu", "device", msg, info))

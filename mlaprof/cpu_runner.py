"""``mlaprof run`` on the CPU: scenario -> metadata builder -> verify backend per layer, watched by
the sync checker, with splits and padding analysed per step; everything goes to the run store.

The CUDA path (real graph capture, capture memory, replay timing) lives in ``mlaprof.gpu``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch

from mlaprof.backends.base import InputPool, VerifyInputs, make_inputs
from mlaprof.backends.registry import get_backend, use_device_splits
from mlaprof.errors import MlaprofError
from mlaprof.metadata import build_metadata, step_shape
from mlaprof.probes.sync_checker import SyncChecker
from mlaprof.rank_counts import counted
from mlaprof.recording import capture_row, event_row, layer_row, step_analysis_rows, step_row
from mlaprof.scenario import LATENT, Scenario
from mlaprof.scenario_meta import run_meta
from mlaprof.store import runmeta
from mlaprof.store.writer import RunWriter, create_run

Progress = Callable[[int, int], None]  # (done, total) layer forwards


class StepClock:
    """What a CPU step's time is. With one intra-op thread torch runs every op in the calling
    thread, so that thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``) is the step's work and does
    not grow when other jobs share the cores, as wall time does. With more threads the work is
    spread over a pool: the step's time is then its wall time. Wall and process CPU time are
    recorded beside it either way (``counters``: ``step_wall_ns``, ``step_process_cpu_ns``)."""

    def __init__(self, threads: int) -> None:
        self.thread_clock = threads == 1
        self.timing = "cpu-thread" if self.thread_clock else "cpu-wall"

    def now(self) -> int:
        return time.thread_time_ns() if self.thread_clock else time.perf_counter_ns()


def use_threads(threads: int) -> int:
    """Set torch's intra-op thread count for this run (recorded with its timings)."""
    if threads < 1:
        raise MlaprofError(f"--threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)
    return torch.get_num_threads()


def start_run(
    sc: Scenario,
    backend: str,
    device: str,
    traces: Path,
    name: str | None = None,
    threads: int | None = None,
    rank: int = 0,
) -> RunWriter:
    # a default name never collides: the folder is reserved with a suffix if taken
    label = name or runmeta.reserve(traces, runmeta.new_run_name(f"{sc.name}-{backend}-{device}"))
    meta = run_meta(sc, backend, device, threads=threads)
    card = card_name(device)
    if card:  # which GPU the numbers are measured on ("cuda" alone does not say)
        meta["device_name"] = card
    writer = create_run(traces, label, meta, rank=rank)
    if card:  # each rank's own card too: a --ranks run's run.json is the launcher's
        writer.set_meta("device_name", card)
    return writer


def card_name(device: str) -> str | None:
    """The GPU a CUDA/HIP ``device`` names, as its driver reports it; None for the CPU."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(dev))


def _forward_layer(backend, inp, meta, out, lse, s_used, checker, check, layer, step):  # noqa: ANN001, ANN202
    """One layer's forward, watched by the sync checker when ``check``; returns its sync count."""
    if not check:
        backend.forward(inp, meta, out, lse, num_splits=s_used or 1)
        return None
    before = len(checker.events)
    with checker.region(layer=layer, step=step):
        backend.forward(inp, meta, out, lse, num_splits=s_used or 1)
    return sum(e.kind == "sync" for e in checker.events[before:])


def run_cpu(
    sc: Scenario,
    backend_name: str,
    writer: RunWriter,
    progress: Progress | None = None,
    check_syncs: str = "first",
    ranges: bool = False,
    collective: Callable[[torch.Tensor], None] | None = None,
) -> None:
    """Run ``sc`` on the CPU and record every step. ``check_syncs``: first | all | off;
    ``ranges``: emit a roctx/NVTX range per layer so rocprofv3 and Nsight show mlaprof's layers;
    ``collective(out)``: the tensor-parallel all-reduce after each layer's attention (outside
    the layer's timing and the sync checker's region: it is the step's, not attention's)."""
    from mlaprof.probes.ranges import layer_range

    if check_syncs not in ("first", "all", "off"):
        raise MlaprofError(f"--check-syncs must be first, all or off, got {check_syncs!r}")
    backend = get_backend(backend_name)
    clock = StepClock(torch.get_num_threads())
    use_device_splits(backend, backend_name, sc.policy)  # as a GPU run of this policy would
    dtype = getattr(backend, "input_dtype", torch.float32)  # e.g. aiter's gluon takes bf16 only
    total = sc.steps * sc.layers
    done = 0
    first_capture_problem = None
    pool = InputPool(sc.heads, dtype, seed=sc.seed * 1000)
    first_inputs: VerifyInputs | None = None  # step 0's, which the path check reuses
    for step in range(sc.steps):
        shape = step_shape(sc, step)
        meta = build_metadata(shape, sc.page_size, sc.min_kv_mode, "cpu", seed=sc.seed + step)
        # written in the step's own commit below: a run stopped mid-step keeps no padding or
        # splits row of a step it never committed
        analysis_rows, main_split = step_analysis_rows(sc, step, meta, shape)
        s_used = main_split.used if main_split else None
        s_deserved = main_split.deserved if main_split else None
        inp = pool.inputs(meta)
        if step == 0:
            first_inputs = inp
        out = torch.empty(meta.num_reqs, meta.qlen, sc.heads, LATENT, dtype=dtype)
        lse = torch.empty(meta.num_reqs, meta.qlen, sc.heads)
        check = check_syncs == "all" or (check_syncs == "first" and step == 0)
        checker = SyncChecker()
        layer_rows = []
        t_step, c_step, p_step = time.perf_counter_ns(), clock.now(), time.process_time_ns()
        for layer in range(sc.layers):
            t0, c0 = time.perf_counter_ns(), clock.now()  # start on the wall clock: a timeline
            with layer_range(f"mlaprof step {step} layer {layer}", enabled=ranges):
                n_sync = _forward_layer(
                    backend, inp, meta, out, lse, s_used, checker, check, layer, step
                )
            c1 = clock.now()
            if collective is not None:
                collective(out)
            layer_rows.append(layer_row(step, layer, t0, c1 - c0, n_sync, s_used, s_deserved))
            done += 1
            if progress:
                progress(done, total)
        c_end, p_end, t_end = clock.now(), time.process_time_ns(), time.perf_counter_ns()
        with writer.transaction():  # one step is one record: all of it or nothing
            for table, r in analysis_rows:
                writer.add(table, **r)
            for r in layer_rows:
                writer.add("layers", **r)
            for e in checker.events:
                writer.add("syncs", **e.to_row())
            row = step_row(step, shape, t_step, c_end - c_step, shape.graph_mode, backend_name,
                           clock.timing)  # fmt: skip
            writer.add("steps", **row)
            for name, value in (("step_wall_ns", t_end - t_step),
                                ("step_process_cpu_ns", p_end - p_step)):  # fmt: skip
                writer.add("counters", source="mlaprof.cpu", name=name, key=str(step),
                           value=float(value), t_ns=t_step)  # fmt: skip
        if check and first_capture_problem is None:
            blocking = [e for e in checker.events if e.kind != "alloc"]
            first_capture_problem = blocking[0] if blocking else False
    if check_syncs != "off":
        # step 0's inputs where they are fp32, as the path check's are (its counts follow the
        # metadata, not the values: a second draw of the KV pool cost more than its forwards)
        same = first_inputs is not None and first_inputs.q_nope.dtype == torch.float32
        record_path_check(sc, writer, first_inputs if same else None)
    # the CPU cannot capture: record the prediction the sync check supports
    if sc.graph_mode == "FULL":
        e = first_capture_problem or None
        message = (
            f"CPU run: {e.op} would abort CUDA/HIP graph capture"
            if e
            else "CPU run: no sync found in the region; capture needs a GPU (--device cuda)"
        )
        row = capture_row(
            step_shape(sc, 0).capture_size,
            "FULL",
            "predicted-fail" if e else "not-attempted",
            message,
            fallback="PIECEWISE" if e else None,
            op=e.op if e else None,
            layer=e.layer if e else None,
            location=e.location if e else None,
        )
        writer.add("captures", **row)


PATH_CHECK_BACKENDS = ("torch", "legacy-flat")  # native 4-D entry vs the pre-fix flattened path


def record_path_check(sc: Scenario, writer: RunWriter, inp: VerifyInputs | None = None) -> None:
    """Sync-check one layer of both verify paths on step 0's metadata, so that every run shows
    what the flattened path costs next to the native one (an ``events`` row per path).
    ``inp``: fp32 inputs for step 0's metadata (the run's own; drawn here where not given)."""
    meta = build_metadata(step_shape(sc, 0), sc.page_size, sc.min_kv_mode, "cpu", seed=sc.seed)
    if inp is None:
        inp = make_inputs(meta, sc.heads, torch.float32, "cpu", seed=sc.seed)
    out = torch.empty(meta.num_reqs, meta.qlen, sc.heads, LATENT)
    for name in PATH_CHECK_BACKENDS:
        checker = SyncChecker()
        with checker.region(layer=0, step=0):
            get_backend(name).forward(inp, meta, out)
        syncs = [e for e in checker.events if e.kind == "sync"]
        allocs = [e for e in checker.events if e.kind == "alloc"]
        allocations = counted(len(allocs), "data-dependent allocation(s)")
        msg = f"{name}: {counted(len(syncs), 'sync(s)')}, {allocations} per layer"
        data = {
            "backend": name,
            "syncs_per_layer": len(syncs),
            "allocs_per_layer": len(allocs),
            "ops": [{"op": e.op, "location": e.location} for e in syncs],
        }
        writer.add("events", **event_row("mlaprof", "path-check", msg, data))

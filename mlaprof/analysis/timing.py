"""Question 5: where does the time go per layer, and what does not capturing cost?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.capture_status import ON_CPU
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import NO_STEPS, RankTiming, Timing
from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_label
from mlaprof.rank_counts import rank_list, rank_span

# torch's intra-op threads of a CPU run (`run --threads`), held by the scenario's module so that
# the command line reads it without this module's section classes
from mlaprof.scenario import DEFAULT_THREADS

if TYPE_CHECKING:  # pandas only where a frame is built: ``mlaprof run --help`` reads constants
    import pandas as pd

# How each ``steps.timing`` value reads in every view: CPU wall times are a reference, not GPU
# numbers (never compare them with a GPU run's).
TIMING_LABELS = {
    "cpu-thread": "CPU time of the stepping thread, 1 thread",
    "cpu-wall": "CPU reference timing",  # on the wall clock
    "graph-replay": "measured graph replay",
    "eager-events": "measured eager (device events)",
    "trace-replay": "imported trace",
    # an imported trace's steps whose MLA kernels launched one by one, or whose mode it does not
    # show (mlaprof.importers.annotate writes these three)
    "trace-eager": "imported trace (eager steps)",
    "trace": "imported trace (steps' mode not shown)",
    "build-interval": "vLLM builder interval",
    "capture": "vLLM capture",
    # the window each step time covers, where two tools time one step differently: vLLM's
    # step annotation (Worker.annotate_profile's record_function around execute_model, vLLM
    # 0.32 gpu_worker.py L1180-1291) opens before the model runner dispatches anything; the
    # mlaprof plugin times from the step's attention-metadata build (its dispatch) to its output
    "vllm-step": "vLLM's step annotation window (execute_model, CPU wall clock)",
    "dispatch-to-output": "mlaprof plugin window: the step's metadata build (dispatch) to its "
    "output (starts after vLLM's step annotation opens)",
    "dispatch-interval": "mlaprof plugin window: one step's dispatch to the next's (idle time "
    "included)",
    # a fleet whose ranks were timed differently: each rank's kind is in the per-rank rows
    "per-rank": "per rank (the ranks' steps were timed differently)",
}
# the same, in a word or two, where a line has no room (an 80-column dashboard)
TIMING_SHORT = {
    "cpu-thread": "CPU time",
    "cpu-wall": "CPU ref",
    "graph-replay": "replay",
    "eager-events": "eager",
    "trace-replay": "trace",
    "trace-eager": "trace",
    "trace": "trace",
    "build-interval": "builder",
    "capture": "capture",
    "vllm-step": "vLLM step",
    "dispatch-to-output": "dispatch-out",
    "dispatch-interval": "dispatch-int",
    "per-rank": "per rank",
}
# the timing kind of a fleet whose ranks' steps were timed differently (each rank's: per_rank)
PER_RANK = "per-rank"
# CPU step timings (``steps.timing``): the stepping thread's CPU time where torch runs one
# intra-op thread (its ops run in that thread), wall time otherwise (mlaprof.cpu_runner.StepClock)
CPU_TIMINGS = ("cpu-thread", "cpu-wall", "vllm-step")  # vllm-step: a CPU trace's annotations
# Run-to-run spread of identical CPU runs (max/min of their median step times), by clock and
# thread count (bench/cpu_step_stability.py, bench/cpu_timing_spread.py; bench/results/). A CPU
# timing change smaller than this is "within run-to-run spread", not a result: compare on a GPU.
CPU_SPREAD_BY_CLOCK = {
    # the stepping thread's CPU time, 1 thread: 1.41x over ten runs of the default scenario, five
    # without and five under a synthetic load of 2 busy processes (load 9.8-14.2 from other jobs
    # besides) on the shared 2-core machine; its loaded/quiet ratio 1.18x, wall time's 3.57x
    # (2026-12-02, bench/results/cpu_step_stability.json)
    ("cpu-thread", 1): 1.41,
    # wall time at 1 thread: 3.64x over six runs at load 8.7-11.8 on the shared 2-core machine
    # (2026-12-01, bench/results/cpu_timing_spread_threads1.json); an upper range
    ("cpu-wall", 1): 3.64,
}
# torch's default pool (2 threads on the shared 2-core machine, six runs on 2026-11-30): the
# spread of runs recorded before the thread count was set, and of counts never measured
CPU_SPREAD_UNSET = 17.1
CPU_SPREAD = CPU_SPREAD_BY_CLOCK[("cpu-thread", DEFAULT_THREADS)]


# The layer times, one name per quantity (the compare's metrics say these; a view's label of the
# same field is to read the same):
# a layer record times the MLA attention of one layer (its verify op; in an imported GPU trace, its
# MLA kernels, stage 1's start to the last's end); the replay-time table times the whole layer on
# the GPU (every kernel between one MLA layer and the next, inside graph replays), attention beside
MLA_LAYER_TIME = "MLA attention time per layer"
GPU_LAYER_TIME = "GPU time per layer (all its kernels)"
# what an imported trace's layer record spans (the compare's provenance says it; a run's own
# layer record is its verify attention call, as the metric's name says)
LAYER_SPANS = {
    "gpu": "the layer's MLA kernels in the trace, stage 1 start to the last one's end",
    "cpu": "the layer's MLA op in the trace, on the CPU",
}


def layer_span(kind: str, on_cpu: bool) -> str | None:
    """What a layer record of a run of ``kind`` (RunKind's value) spans where the metric's name
    does not say it all (:data:`LAYER_SPANS`; None: a run's own verify call); ``on_cpu``: the
    run's steps were timed on the CPU."""
    if kind != "trace":
        return None
    return LAYER_SPANS["cpu" if on_cpu else "gpu"]


def cpu_spread(threads: int | None, timing: str | None = "cpu-wall") -> float:
    """The measured run-to-run spread for CPU runs timed by ``timing`` with ``threads`` (None:
    not recorded)."""
    return (
        CPU_SPREAD_BY_CLOCK.get((str(timing), threads), CPU_SPREAD_UNSET)
        if threads
        else CPU_SPREAD_UNSET
    )


def timing_label(timing: str | None) -> str:
    return TIMING_LABELS.get(str(timing), str(timing)) if timing else "unknown timing"


def measured_label(timing: str | None, measured_on: str | None) -> str:
    """The timing's label with where it was measured, for a timing that was ("measured graph
    replay on cuda (NVIDIA H200)"); the bare label otherwise (a CPU reference, a trace)."""
    label = timing_label(timing)
    return f"{label} {measured_on}" if measured_on and label.startswith("measured") else label


def served_steps(steps: pd.DataFrame, layers: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The steps (and their layers) that time the run: one served-step definition for the
    summary and the figures (:mod:`mlaprof.analysis.series`). Steps served under torch.profiler
    for a kernel timeline are slowed by it; the serving graph's plain replays, where the run has
    them, stand for the graph steps (twin, instrumented replays are corrected for the event cost
    but still a sample)."""
    profiled = steps["timing"].fillna("").str.endswith("-profiled") if not steps.empty else None
    if profiled is not None and profiled.any():
        if not layers.empty:
            layers = layers[~layers["step"].isin(steps.loc[profiled, "step"])]
        steps = steps[~profiled]
    if not steps.empty:
        plain = steps[steps["timing"] == "graph-replay"]
        if not plain.empty:
            import pandas as pd

            steps = pd.concat([plain, steps[~steps["timing"].fillna("").str.startswith("graph")]])
    return steps, layers


def timing_summary(
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    threads: int | None = None,
    measured_on: str | None = None,
) -> Timing:
    """The run's step and layer times over its served steps (:func:`served_steps`); ``threads``:
    torch's CPU threads the steps ran with (None: not recorded, e.g. an imported trace);
    ``measured_on``: where the run's measured numbers were taken ("on cuda (NVIDIA H200)"),
    which the label of a measured timing says, as every other measured number does."""
    steps, layers = served_steps(steps, layers)
    if steps.empty:  # nothing recorded: no count, no agreement, no kind (each reads NO_STEPS)
        return Timing(
            steps=None,
            timing=None,
            timing_label=NO_STEPS,
            step_median_us=None,
            layer_median_us=None,
            by_mode={},
            full_share=None,
            per_rank=[],
            ranks_agree=None,
            step_median_text=None,
            threads=threads,
        )
    by_mode = median_by_mode(steps)
    timed = steps.dropna(subset=["duration_ns"])
    by_rank = {int(r): g for r, g in (steps.groupby("rank") if "rank" in steps else [(0, steps)])}
    kinds = {r: timing_kind(g) for r, g in by_rank.items()}
    # each rank's own medians beside the pooled ones (by_mode, layer_median_us): never merged
    timed_layers = layers.dropna(subset=["duration_ns"]) if not layers.empty else layers
    layer_med = (
        {}
        if timed_layers.empty
        else {0: float(timed_layers["duration_ns"].median()) / 1e3}
        if "rank" not in timed_layers
        else {
            int(r): float(v) / 1e3
            for r, v in timed_layers.groupby("rank")["duration_ns"].median().items()
        }
    )
    per_rank = [
        RankTiming(
            rank=int(r),
            steps=int(len(g)),
            step_median_us=float(g["duration_ns"].median()) / 1e3,
            timing=kinds.get(int(r)),
            by_mode=median_by_mode(g),
            layer_median_us=layer_med.get(int(r)),
        )
        for r, g in (timed.groupby("rank") if "rank" in timed else [(0, timed)])
    ]
    pooled = float(steps["duration_ns"].median()) / 1e3
    timing, label = _fleet_timing(kinds, measured_on)
    return Timing(
        steps=int(len(steps)),
        timing=timing,
        timing_label=label,
        # over every rank's steps; where ranks' medians differ, views print per_rank
        # (step_median_text), never this pooled value alone
        step_median_us=pooled,
        per_rank=per_rank,
        ranks_agree=len({round(r.step_median_us, 1) for r in per_rank}) <= 1,
        step_median_text=step_median_text(pooled, per_rank),
        layer_median_us=float(layers["duration_ns"].median()) / 1e3 if not layers.empty else None,
        by_mode=by_mode,
        # steps replayed as a graph: measured graph replays of a GPU run, or an imported trace's
        # replays ("graph"); a run that replays nothing (the CPU: FULL is only its plan) has no
        # share, not 100% (None, never a number that reads as a result)
        full_share=replayed_share(steps),
        threads=threads,
    )


def timing_kind(steps: pd.DataFrame) -> str | None:
    """How one rank's served steps were timed: its first served step's ``timing`` (the plain
    graph replays first, :func:`served_steps`); None where none says."""
    known = steps["timing"].dropna() if "timing" in steps else steps.iloc[:0]
    return str(known.iloc[0]) if len(known) else None


def _fleet_timing(kinds: dict[int, str | None], measured_on: str | None) -> tuple[str | None, str]:
    """The timing kind and label of every rank's steps: the ranks' one kind where they agree;
    :data:`PER_RANK` where they differ, the label naming each rank's ("rank 0: imported trace;
    rank 1: imported trace (eager steps)")."""
    by: dict[str | None, list[int]] = {}
    for r, k in sorted(kinds.items()):
        by.setdefault(k, []).append(r)
    if len(by) <= 1:
        kind = next(iter(by), None)
        return kind, measured_label(kind, measured_on)
    return PER_RANK, "; ".join(
        f"{rank_list(rs)}: {measured_label(k, measured_on)}" for k, rs in by.items()
    )


# a scenario step timed on the CPU: its graph mode is the plan it was shaped by (its padding
# rows), not a graph it ran in (mlaprof.cpu_runner: the CPU captures and replays nothing)
PLANNED_TIMINGS = ("cpu-thread", "cpu-wall")


def step_modes(steps: pd.DataFrame) -> pd.Series:
    """How each step ran, the one key of the timing's ``by_mode`` and the figures' per-mode
    series: its graph mode, or for a scenario step timed on the CPU the mode whose shape it
    ran eagerly ("FULL shape on cpu": never "FULL" beside a capture that predicts PIECEWISE)."""
    mode = steps["graph_mode"].fillna("?").astype(str)
    if "timing" not in steps:
        return mode
    return mode.where(~steps["timing"].isin(PLANNED_TIMINGS), mode + ON_CPU)


def median_by_mode(served: pd.DataFrame) -> dict[str, float]:
    """The median step time (µs) per graph mode of served steps (:func:`served_steps`)."""
    timed = served.dropna(subset=["duration_ns"])
    return {
        str(mode): float(g["duration_ns"].median()) / 1e3
        for mode, g in timed.groupby(step_modes(timed))
        if mode != "?"
    }


# the graph modes of a step that ran as one graph replay, where its timing is no CPU plan: a
# trace's replay ("graph"), a FULL graph a GPU run replayed or vLLM dispatched (an engine's
# steps are timed "dispatch-interval", their mode is the dispatcher's)
REPLAYED_MODES = ("FULL", "graph")


def replayed_share(steps: pd.DataFrame) -> float | None:
    """Share of the steps that ran as a graph replay; None where no step could (CPU wall
    timings: the run's FULL mode is what it would capture, nothing was replayed)."""
    timing = steps["timing"].fillna("")
    could = ~timing.isin(CPU_TIMINGS)
    if not could.any():
        return None
    replayed = timing.str.startswith("graph") | steps["graph_mode"].isin(REPLAYED_MODES)
    return float(replayed[could].sum() / len(steps))


def step_median_text(pooled: float, per_rank: list[RankTiming]) -> str:
    """``"161.0 µs"`` when every rank's median reads the same, else the range with the ranks
    behind each value (``"128.0-194.0 µs across 8 ranks (ranks 0-3: 194.0, 4-7: 128.0)"``)."""
    return per_rank_us_text(pooled, {r.rank: r.step_median_us for r in per_rank})


def us_reads(v: float) -> float:
    """A time in µs as every view reads it (one decimal): ranks whose values read the same
    may share a value (:func:`per_rank_us_text`) or a row (the replay time's layer rows)."""
    return round(v, 1)


def per_rank_us_text(pooled: float, values: dict[int, float]) -> str:
    """A time (µs) of several ranks: ``pooled`` where every rank's value (``values``: rank ->
    its own) reads the same, else the range with the ranks behind each value."""
    by_value: dict[float, list[int]] = {}
    for rank, v in sorted(values.items()):
        by_value.setdefault(us_reads(v), []).append(rank)
    if len(by_value) <= 1:
        return f"{pooled:.1f} µs"
    lo, hi = min(by_value), max(by_value)
    parts = ", ".join(
        f"{rank_span(rs)}: {v:.1f}" for v, rs in sorted(by_value.items(), key=lambda kv: kv[1])
    )
    return f"{lo:.1f}-{hi:.1f} µs across {len(values)} ranks (ranks {parts})"


def timing_findings(t: Timing) -> list[Finding]:
    modes = t.by_mode
    # live runs: FULL; imported traces: "graph" (steps replayed in a graph)
    ref = next((r for r in ("FULL", "graph") if r in modes), None)
    if ref and len(modes) > 1:
        other = {m: v for m, v in modes.items() if m != ref}
        m, v = max(other.items(), key=lambda kv: kv[1])
        ratio = v / modes[ref] if modes[ref] else float("nan")
        what = "FULL-graph replay" if ref == "FULL" else "graph replays (imported trace)"
        # a fleet's medians pool every rank's steps: said as the timing section's label says it
        pooled = over_ranks_label(over_ranks_how(Timing, "by_mode"), len(t.per_rank))
        return [
            Finding(
                kind="timing",
                severity="warning" if ratio > 1.2 else "info",
                title=f"{m} steps take {ratio:.2f}x as long as {what}",
                evidence=f"median step {modes[ref]:.1f} us ({ref}) vs {v:.1f} us ({m})" + pooled,
                fix="make the verify path capturable so every step replays the FULL graph",
                data={"ratio": ratio},
            )
        ]
    return []

"""The series every figure draws, computed once per run from its evidence with the analyzers'
own rules, per rank (figures draw one rank; nothing here merges ranks).

A figure (:mod:`mlaprof.figures`) takes a :class:`RankSeries` (or the summary holding it) and
draws it as it is: step time per graph mode is :func:`mlaprof.analysis.timing.timing_summary`'s
median of the same served steps, padding totals are :func:`mlaprof.analysis.padding.
padding_summary`'s, S per layer is the summary's layer table, the engine's modelled S per step
is the shadow analysis' ``per_step``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlaprof.analysis.capture import FAILED_CAPTURE
from mlaprof.analysis.frame_rows import column_rows
from mlaprof.analysis.headline import splits_scope
from mlaprof.analysis.padding import padding_summary
from mlaprof.analysis.sections import device_cap_text, not_runnable_reason
from mlaprof.analysis.splits import (
    decided_on_device,
    frozen_condition,
    frozen_rule,
    grid_caps,
    on_target,
    replayed_splits,
    what_if_rule,
)
from mlaprof.analysis.timing import median_by_mode, served_steps, step_modes
from mlaprof.rank_counts import plural
from mlaprof.splits.policies import HOST_FALLBACK
from mlaprof.textsafe import short_of, sql_head

if TYPE_CHECKING:
    from mlaprof.analysis.sections import (
        LayerRow,
        Padding,
        Scenario,
        ShadowSection,
        ShadowStep,
        Timing,
        TraceSyncs,
    )
    from mlaprof.store.reader import Run

# how many steps the timeline draws, how many kernels at most, and how many kernel names get
# their own bar in the kernel-time figure (the rest: "other kernels")
TIMELINE_STEPS = 3
TIMELINE_KERNELS = 3000
TIMELINE_TOP = 8
KERNEL_TOP = 12
# the kernel columns the timeline reads (its bars: name, lane, time, S and layer; the window)
TIMELINE_COLUMNS = ("name", "step", "layer", "start_ns", "end_ns", "stream", "splits")
MODE_ORDER = ("FULL", "PIECEWISE", "NONE")
MEMORY_VIEWS = ("pool_bytes", "allocator_bytes", "driver_bytes")
PADDING_COLUMNS = (
    "real_rows", "padding_rows", "real_tokens", "padding_tokens", "kv_bytes_real",
    "kv_bytes_padding",
)  # fmt: skip


def _f(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if x != x else x


def _i(v: Any) -> int | None:
    x = _f(v)
    return None if x is None else int(x)


def _s(v: Any) -> str | None:
    return None if v is None or (isinstance(v, float) and v != v) or v is pd.NA else str(v)


def _num(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    # a shallow copy: pandas copies on write (always, since 3.0), so the columns set here and
    # any later write to the result never reach ``df``, and the others are not copied
    out = df.copy(deep=False)
    for c in cols:
        if out[c].dtype != "float64":  # a float column already is what this makes of it
            out[c] = pd.to_numeric(out[c], errors="coerce").astype(float)
    return out


@dataclass(frozen=True)
class StepPoint:
    step: int | None
    us: float
    num_reqs: int | None


@dataclass(frozen=True)
class ModeTiming:
    """One graph mode's served steps: the median is the timing analyzer's ``by_mode`` value."""

    mode: str
    median_us: float
    min_us: float
    max_us: float
    steps: int
    timing: str  # how the first step of the mode was timed ("unknown" where not recorded)
    points: tuple[StepPoint, ...]


@dataclass(frozen=True)
class SplitPoint:
    """A policy's S at one step (its worst row where an import repeats the step). A policy that
    decides S on the device has no host ``used`` / ``frozen`` (``on_device``)."""

    policy: str
    step: int | None
    capture_size: int | None
    used: float | None
    deserved: float | None
    frozen: float | None
    occupancy_used: float | None
    occupancy_deserved: float | None
    note: str | None
    on_device: bool
    # why the policy's kernel cannot run this step (the splits rows' rule and field:
    # mlaprof.analysis.sections.not_runnable_reason); None: it runs
    not_runnable: str | None = None
    # a policy vLLM does not run here: the condition ``frozen`` holds on (the splits rows'
    # ``frozen_what_if``, mlaprof.analysis.splits.frozen_what_if); None: no frozen S, or the
    # route runs it
    frozen_what_if: str | None = None
    # a policy vLLM does not run here: the condition every S of the point holds on (the splits
    # rows' ``what_if``); None: the route runs it, or no route is modelled
    what_if: str | None = None


@dataclass(frozen=True)
class SplitMedian:
    """Median S over the steps of one (policy, capture size)."""

    policy: str
    capture_size: int
    used: float | None
    deserved: float | None
    frozen: float | None
    # the policy's frozen S is a what-if: its condition (its points' ``frozen_what_if``)
    frozen_what_if: str | None = None


@dataclass(frozen=True)
class OccupancyMedian:
    policy: str
    used: float | None
    deserved: float | None
    steps: int


@dataclass(frozen=True)
class LayerS:
    """The summary's layer table row: S used (last record), S min, the reference S."""

    layer: int
    used: int | None
    minimum: int | None
    reference: int | None
    reference_is_deserved: bool
    grid_cap: int | None = None  # S decided on the device: the records' cap (``used`` None)


@dataclass(frozen=True)
class LayerTime:
    layer: int
    median_us: float
    min_us: float
    max_us: float
    steps: int


@dataclass(frozen=True)
class KernelTime:
    label: str
    total_us: float
    launches: int


@dataclass(frozen=True)
class MemoryBar:
    graph_mode: str
    capture_size: int
    pool_bytes: float | None
    allocator_bytes: float | None
    driver_bytes: float | None
    capture_ns: float | None


@dataclass(frozen=True)
class FailedCapture:
    status: str
    capture_size: int | None
    layer: int | None
    op: str | None
    location: str | None
    fallback: str | None


@dataclass(frozen=True)
class Bar:
    """One bar of the timeline (µs since the first bar shown)."""

    lane: str
    series: str  # the legend entry
    start_us: float
    dur_us: float
    label: str = ""
    # step: (step, timing, rows); layer: (step, layer, syncs, S used, S deserved); kernel:
    # (S, layer); None where the run does not hold the value
    detail: tuple[int | str | None, ...] = ()


@dataclass(frozen=True)
class Timeline:
    steps_shown: tuple[int, ...]
    steps_total: int
    kernels_shown: int
    kernels_in_window: int
    lanes: tuple[str, ...]
    bars: tuple[Bar, ...]
    # what ``steps_total`` counts: "verify steps" where a drafter's passes were told apart
    # (they are not among them), else "steps"
    noun: str = "steps"

    @property
    def steps_text(self) -> str:
        """The steps shown as every view titles them: a count beside a count, then the step
        ids (``3 of 3 verify steps (step ids 0, 4, 8)``), never a span of ids beside a count
        of steps that are not all in it; empty where no step is shown."""
        ch = self.steps_shown
        if not ch:
            return ""
        word = plural("step id(s)", len(ch))
        return f"{len(ch)} of {self.steps_total} {self.noun} ({word} {id_spans(ch)})"


def id_spans(ids: tuple[int, ...] | list[int], most: int = 6) -> str:
    """Sorted ids as runs (``0–2, 5, 9–11``): three or more consecutive ids as one span; past
    ``most`` runs, the rest as "…"."""
    runs: list[list[int]] = []
    for x in sorted(ids):
        if runs and x == runs[-1][-1] + 1:
            runs[-1].append(x)
        else:
            runs.append([x])
    words = [
        f"{r[0]}–{r[-1]}" if len(r) >= 3 else ", ".join(str(x) for x in r) for r in runs[:most]
    ]
    return ", ".join(words) + (", …" if len(runs) > most else "")


@dataclass(frozen=True)
class Window:
    """Another window of one rank's step timeline than the summary's (a figure's ``steps`` /
    ``max_kernels``): drawn over the steps the report counts, as the summary's is."""

    steps: tuple[int, ...] | None = None  # the step ids; None: the first ``first``
    max_kernels: int = TIMELINE_KERNELS
    first: int = TIMELINE_STEPS
    rank: int | None = None  # the rank drawn; None: the lowest
    # the drawn rank's drafter passes, told apart by the analysis (build_series fills them):
    # a pass asked for is named as one (window_steps)
    passes: tuple[int, ...] = ()


def window_steps(want: tuple[int, ...], steps: pd.DataFrame, passes: list[int], rank: int) -> None:
    """Raise where a window asks for a step the report does not count on ``rank`` (``steps``:
    its steps; ``passes``: its drafter passes, told apart by the analysis): never a partial
    window drawn as the one asked for."""
    have = {int(x) for x in pd.to_numeric(steps["step"], errors="coerce").dropna()}
    missing = sorted(set(want) - have)
    if not missing or steps.empty:
        return
    from mlaprof.errors import MlaprofError

    drafted = sorted(set(missing) & set(passes))
    why = (
        f"; {id_spans(drafted)}: the drafter's passes, not verify steps (the report leaves them "
        "out)"
        if drafted
        else ""
    )
    raise MlaprofError(
        f"no step {id_spans(missing)} among rank {rank}'s steps the report counts "
        f"({id_spans(sorted(have))}){why}"
    )


@dataclass(frozen=True)
class PaddingStep:
    """One step's padding record (None where the run did not record a column)."""

    step: int | None
    capture_size: int | None
    real_rows: int | None
    padding_rows: int | None
    real_tokens: int | None
    padding_tokens: int | None
    kv_bytes_real: int | None
    kv_bytes_padding: int | None


@dataclass(frozen=True)
class RunInfo:
    """What run.json says that no other section holds (the HTML page's run table)."""

    created: str | None
    source: str | None
    versions: dict[str, str | None]
    git: str | None
    reason: str | None
    # what ``created`` is: "imported" (when an importer made the run; the summary's
    # ``imported`` section says from where) or "created" (RunMeta.imported decides both)
    created_label: str = "created"
    # the versions and git revision are the importing machine's, not the run's own
    importer_versions: bool = False


@dataclass(frozen=True)
class RankSeries:
    """Everything the figures draw for one rank."""

    rank: int
    policy: str | None  # the run's own split policy
    target: str | None  # the device preset occupancy and S are modelled for
    modes: tuple[ModeTiming, ...] = ()
    splits: tuple[SplitPoint, ...] = ()
    split_medians: tuple[SplitMedian, ...] = ()
    occupancy: tuple[OccupancyMedian, ...] = ()
    layer_s: tuple[LayerS, ...] = ()
    layer_time: tuple[LayerTime, ...] = ()
    layer_time_steps: int = 0
    kernels: tuple[KernelTime, ...] = ()  # every kernel label, largest GPU time first
    padding: Padding | None = None  # the padding section's totals, of this rank
    # the KV bytes its real rows read (beside padding's kv_bytes_padding), summed over the steps
    # that recorded them; None where none did (never a 0 of real work)
    kv_bytes_real: int | None = None
    padding_steps: tuple[PaddingStep, ...] = ()  # the padding record of each step
    memory: tuple[MemoryBar, ...] = ()
    failed_captures: tuple[FailedCapture, ...] = ()
    timeline: Timeline | None = None
    # the shadow analysis' modelled S per verify step of this rank (a recorded engine only)
    shadow: tuple[ShadowStep, ...] = ()
    # the condition the frozen S holds on, as the summary's splits rows say it (None: none;
    # mlaprof.analysis.splits.frozen_condition): the figures say it with the frozen series
    frozen_if: str | None = None
    # where the split figures' S come from, in the splits table's words
    # (mlaprof.analysis.headline.splits_scope): "modelled" for a CPU run, never "on <target>"
    # read as measured there
    split_scope: str = "modelled"

    @property
    def policies(self) -> list[str]:
        return list(dict.fromkeys(p.policy for p in self.splits))


@dataclass(frozen=True)
class Series:
    """The summary's figure section: one :class:`RankSeries` per rank, and the run facts the
    HTML page shows that no other section holds."""

    run: str
    ranks: tuple[RankSeries, ...]
    engine: bool  # a recorded vLLM engine (the shadow figure applies)
    shadow_title: str  # "AITER <version> on <device>" of the shadow analysis
    info: RunInfo | None  # created, source, versions, git, reason (from run.json)

    def rank(self, rank: int | None = None) -> RankSeries | None:
        """The rank a figure draws: ``rank``, else the lowest."""
        if not self.ranks:
            return None
        if rank is None:
            return self.ranks[0]
        for r in self.ranks:
            if r.rank == rank:
                return r
        from mlaprof.errors import MlaprofError
        from mlaprof.rank_counts import rank_list

        has = rank_list(r.rank for r in self.ranks)
        raise MlaprofError(f"no rank {rank} in this run (it has {has})")

    def label(self, rank: int | None = None) -> str:
        """`` — <run>`` for titles, with the rank drawn when the run has several."""
        if not self.run:
            return ""
        if len(self.ranks) > 1:
            shown = self.ranks[0].rank if rank is None else rank
            from mlaprof.rank_counts import ranks_of

            return f" — {self.run}, {ranks_of([shown], len(self.ranks))}"
        return f" — {self.run}"

    def to_json(self) -> dict[str, Any]:
        """The section as ``--json`` prints it: the timeline's raw bars (up to 3000 kernel
        records a rank) stay out, their counts stay in."""
        doc = asdict(self)
        for r in doc["ranks"]:
            if r["timeline"] is not None:
                r["timeline"].pop("bars")
        return doc


# -- building ---------------------------------------------------------------------------------


def _by_rank(df: pd.DataFrame, rank: int) -> pd.DataFrame:
    """The rows of ``rank``: the frame itself where every row is that rank's (a one-rank run:
    nothing here writes into a table it is given), so that what was computed over the whole
    frame (the summary's timing) is known to hold for the rank."""
    if df is None or df.empty or "rank" not in df.columns:
        return df if df is not None else pd.DataFrame()
    mine = pd.to_numeric(df["rank"]) == rank
    return df if mine.all() else df[mine]


def mode_timing(
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    by_mode: dict[str, float] | None = None,
    served: pd.DataFrame | None = None,
) -> tuple[ModeTiming, ...]:
    """Per graph mode (FULL first): the timing analyzer's median over the same served steps,
    with every step as a point. ``by_mode``: that analyzer's ``by_mode`` of these steps and
    layers where the caller holds it; ``served``: their served steps (:func:`served_steps`)."""
    st = served_steps(steps, layers)[0] if served is None else served
    if st.empty:
        return ()
    if by_mode is None:  # the timing analyzer's rule over the same served steps
        by_mode = median_by_mode(st)
    st = _num(st, "step", "duration_ns", "num_reqs").dropna(subset=["duration_ns"])
    out = []
    for mode, g in st.groupby(step_modes(st)):
        timing = g["timing"].dropna()
        out.append(
            ModeTiming(
                mode=str(mode),
                median_us=by_mode.get(str(mode), float(g["duration_ns"].median()) / 1e3),
                min_us=float(g["duration_ns"].min()) / 1e3,
                max_us=float(g["duration_ns"].max()) / 1e3,
                steps=len(g),
                timing=str(timing.iloc[0]) if len(timing) else "unknown",
                points=tuple(
                    StepPoint(_i(s), float(d) / 1e3, _i(n))
                    for s, d, n in zip(g["step"], g["duration_ns"], g["num_reqs"], strict=True)
                ),
            )
        )
    order = {m: i for i, m in enumerate(MODE_ORDER)}
    return tuple(sorted(out, key=lambda m: order.get(m.mode, 9)))


def split_points(
    splits: pd.DataFrame,
    stands: Callable[[str], bool] | None = None,
    what_if: Callable[[str], str | None] | None = None,
) -> tuple[SplitPoint, ...]:
    """Per policy and step one row (the worst: lowest used / deserved, where an import repeats
    a step), in step order; device-decided policies lose their host S used and frozen, and a
    policy whose modelled frozen S does not stand in the run (``stands``:
    :func:`mlaprof.analysis.splits.frozen_rule`) its frozen S; a policy vLLM does not run here
    keeps its frozen S with the condition it holds on (``what_if``, the splits rows' rule:
    :func:`mlaprof.analysis.splits.what_if_rule`)."""
    if splits.empty:
        return ()
    cols = ("step", "capture_size", "used", "deserved", "frozen", "occupancy_used",
            "occupancy_deserved")  # fmt: skip
    sp = _num(splits, *cols)
    sp["policy"] = sp["policy"].astype(str)
    ratio = (sp["used"] / sp["deserved"]).fillna(float("inf"))
    sp = sp.assign(_r=ratio).sort_values("_r", kind="stable")
    sp = sp.drop_duplicates(subset=["policy", "step"], keep="first").drop(columns="_r")
    pols = list(dict.fromkeys(splits["policy"].astype(str)))  # recorded order
    # column by column as Python values (iterating rows of a frame costs ~10 us a row); a
    # policy's rows in step order, NaN last (one row per policy and step: no ties)
    col = {c: sp[c].tolist() for c in ("policy", "note", *cols)}
    rows: dict[str, list[int]] = {}
    for i, pol in enumerate(col["policy"]):
        rows.setdefault(pol, []).append(i)
    steps = col["step"]
    out = []
    for pol in pols:
        mine = sorted(rows.get(pol, []), key=lambda i: (steps[i] != steps[i], _nan0(steps[i])))
        on_device = decided_on_device(pol)
        frozen = stands is None or stands(pol)
        cond = None if what_if is None else what_if(pol)
        for i in mine:
            note = _s(col["note"][i])
            # the splits section's rule: a persistent row AITER decided on the host is not,
            # nor is a kernel that cannot run
            dev = (
                on_device
                and HOST_FALLBACK not in (note or "")
                and not_runnable_reason(note) is None
            )
            held = _f(col["frozen"][i]) if frozen and not dev else None
            out.append(
                SplitPoint(
                    policy=pol,
                    step=_i(steps[i]),
                    capture_size=_i(col["capture_size"][i]),
                    used=None if dev else _f(col["used"][i]),
                    deserved=_f(col["deserved"][i]),
                    frozen=held,
                    occupancy_used=_f(col["occupancy_used"][i]),
                    occupancy_deserved=_f(col["occupancy_deserved"][i]),
                    note=note,
                    on_device=dev,
                    not_runnable=not_runnable_reason(note),
                    frozen_what_if=cond if held is not None else None,
                    what_if=cond,
                )
            )
    return tuple(out)


def _nan0(x: float) -> float:
    return 0.0 if x != x else x


def _median(vals: list[float | None]) -> float | None:
    """The median of the values given (None skipped), as pandas' and NumPy's: the middle value,
    or the two middle ones summed and halved."""
    xs = sorted(float(v) for v in vals if v is not None)
    if not xs:
        return None
    if any(x != x for x in xs):  # a NaN: pandas skips it
        return _median([x for x in xs if x == x])
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def split_medians(points: tuple[SplitPoint, ...]) -> tuple[SplitMedian, ...]:
    groups: dict[tuple[str, int], list[SplitPoint]] = {}
    for p in points:
        if p.capture_size is not None:
            groups.setdefault((p.policy, p.capture_size), []).append(p)
    return tuple(
        SplitMedian(
            pol,
            size,
            *(_median([getattr(p, c) for p in g]) for c in ("used", "deserved", "frozen")),
            frozen_what_if=next((p.frozen_what_if for p in g if p.frozen_what_if), None),
        )
        for (pol, size), g in sorted(groups.items(), key=lambda kv: kv[0][1])
    )


def occupancy_medians(points: tuple[SplitPoint, ...]) -> tuple[OccupancyMedian, ...]:
    out = []
    for pol in dict.fromkeys(p.policy for p in points):
        g = [
            p for p in points
            if p.policy == pol and (p.occupancy_used is not None or p.occupancy_deserved is not None)
        ]  # fmt: skip
        if g:
            out.append(
                OccupancyMedian(
                    pol,
                    _median([p.occupancy_used for p in g]),
                    _median([p.occupancy_deserved for p in g]),
                    len({p.step for p in g}),
                )
            )
    return tuple(out)


def layer_s(layer_rows: list[LayerRow], rank: int) -> tuple[LayerS, ...]:
    """The summary's layer table for one rank, as the S-per-layer figure draws it."""
    return tuple(
        LayerS(
            layer=int(r.layer),
            used=r.S_used,
            minimum=r.S_min,
            reference=r.S_reference,
            reference_is_deserved=str(r.reference).startswith("deserved"),
            grid_cap=r.S_grid_cap,
        )
        for r in layer_rows
        if r.rank == rank
    )


def layer_times(layers: pd.DataFrame) -> tuple[tuple[LayerTime, ...], int]:
    ly = _num(layers, "step", "layer", "duration_ns").dropna(subset=["layer", "duration_ns"])
    if ly.empty:
        return (), 0
    d = ly.groupby("layer")["duration_ns"]
    # one aggregate at a time (a list given to .agg costs ~2 ms more a rank), as one float
    # array (the values a row of iterrows holds), row by row
    g = pd.DataFrame({"median": d.median(), "min": d.min(), "max": d.max(), "count": d.count()})
    g = g.sort_index()
    vals = g[["median", "min", "max", "count"]].to_numpy(dtype=float)
    rows = tuple(
        LayerTime(int(layer), med / 1e3, lo / 1e3, hi / 1e3, int(n))
        for layer, (med, lo, hi, n) in zip(g.index, vals, strict=True)
    )
    return rows, int(ly["step"].nunique())


def kernel_times(per: pd.DataFrame) -> tuple[KernelTime, ...]:
    """``per``: name, sum (µs), count per kernel name. Summed per label, largest first."""
    if per.empty:
        return ()
    per = per.assign(kernel=per["name"].map(lambda n: kernel_label(n)))
    g = per.groupby("kernel")[["sum", "count"]].sum().sort_values("sum", ascending=False)
    return tuple(
        KernelTime(str(k), float(total), int(n))
        for k, total, n in zip(g.index, g["sum"].tolist(), g["count"].tolist(), strict=True)
    )


def top_kernels(kernels: tuple[KernelTime, ...], top: int = KERNEL_TOP) -> list[KernelTime]:
    """The ``top`` largest labels and the rest as one "other kernels" row."""
    rows = list(kernels)
    if len(rows) <= top:
        return rows
    rest = rows[top:]
    other = KernelTime(f"other kernels ({len(rest)} names)", sum(r.total_us for r in rest),
                       sum(r.launches for r in rest))  # fmt: skip
    return [*rows[:top], other]


def padding_totals(pad: pd.DataFrame) -> tuple[Padding | None, int | None]:
    """The padding section's totals of this rank (:func:`padding_summary`), and the KV bytes the
    real rows read (the waterfall's third panel): summed over the steps that recorded them, None
    where no step did."""
    if pad is None or pad.empty:
        return None, None
    p = _num(pad, *PADDING_COLUMNS)
    known = p["kv_bytes_real"].dropna()
    return padding_summary(p), int(known.sum()) if len(known) else None


def padding_steps(pad: pd.DataFrame) -> tuple[PaddingStep, ...]:
    if pad is None or pad.empty:
        return ()
    p = _num(pad, "step", "capture_size", *PADDING_COLUMNS).sort_values("step")
    rows = column_rows(p, "step", "capture_size", *PADDING_COLUMNS)
    return tuple(PaddingStep(*(_i(v) for v in r)) for r in rows)


def memory_bars(memory: pd.DataFrame) -> tuple[MemoryBar, ...]:
    mem = _num(memory, "capture_size", "capture_ns", *MEMORY_VIEWS).dropna(subset=["capture_size"])
    if mem.empty:
        return ()
    mem["graph_mode"] = mem["graph_mode"].fillna("?").astype(str)
    out = []
    for mode in dict.fromkeys(mem["graph_mode"]):
        part = mem[mem["graph_mode"] == mode]
        g = part.groupby("capture_size").sum(numeric_only=True, min_count=1).sort_index()
        rows = column_rows(g, *MEMORY_VIEWS, "capture_ns")
        for size, r in zip(g.index, rows, strict=True):
            out.append(MemoryBar(mode, int(size), *(_f(v) for v in r)))
    return tuple(out)


def failed_captures(captures: pd.DataFrame) -> tuple[FailedCapture, ...]:
    if captures.empty:
        return ()
    bad = captures[captures["status"].isin(FAILED_CAPTURE)]
    return tuple(
        FailedCapture(
            str(r.status), _i(r.capture_size), _i(r.layer), _s(r.op), _s(r.location), _s(r.fallback)
        )  # fmt: skip
        for r in bad.itertuples()
    )


def is_run(data: Any) -> bool:
    """Whether ``data`` is a Run (mlaprof.load: read through its ``query``), not one of the
    frames a figure or a series also takes (a DataFrame has a ``query`` method of its own)."""
    return hasattr(data, "query") and not isinstance(data, (pd.DataFrame, Mapping))


def _kernels_per_rank(run: Any, frame: pd.DataFrame | None = None) -> dict[int, pd.DataFrame]:
    """Per rank: each kernel name's GPU time summed (µs) and launch count, over the kernels
    with both timestamps; read by SQL from a Run, or from a kernels ``frame`` handed over whole
    (a notebook's), by the same rule."""
    if frame is not None and not frame.empty:
        k = frame.dropna(subset=["start_ns", "end_ns"])
        # as the SQL does: subtracted before the cast (epoch nanoseconds as float64 are 256 ns
        # apart, a few-µs kernel's time off by up to a tenth), summed in ns, then in µs
        k = k.assign(ns=(k["end_ns"] - k["start_ns"]).astype("float64"))
        per = k.groupby(["rank", "name"], sort=False)["ns"].agg(sum="sum", count="count")
        per = per.assign(sum=per["sum"] / 1e3).reset_index()
    elif not is_run(run):
        return {}
    elif (stored := _stored_per_name(run)) is not None:
        per = stored
    else:
        # one query over every rank (grouped by rank: each row is one rank's); a recorded
        # run's kernels sit in its databases and read without duckdb, as vLLM's environment has it
        per = run.query(
            "SELECT rank, name, SUM(CAST(end_ns - start_ns AS DOUBLE)) / 1e3 AS sum, "
            "COUNT(*) AS count FROM kernels WHERE start_ns IS NOT NULL AND end_ns IS NOT NULL "
            "GROUP BY rank, name ORDER BY rank, name",
            portable=True,
        )
    return {int(r): g for r, g in per.groupby("rank")} if len(per) else {}


def _stored_per_name(run: Any) -> pd.DataFrame | None:
    """The per-name sums a fleet import stored for every rank that has kernels
    (:mod:`mlaprof.analysis.replay_sums`), as the SQL below returns them; None where a rank's
    are missing or were computed from other kernels than the store holds."""
    from mlaprof.analysis import replay_sums
    from mlaprof.store import aggregates

    if not all(hasattr(run, a) for a in ("databases", "count_per_rank", "rank_meta")) or any(
        role for _, role in run.databases
    ):
        return None
    rows = []
    for r, n in sorted(run.count_per_rank("kernels").items()):
        if not n:
            continue
        got = aggregates.read(run, r, replay_sums.NAMES)
        if got is None or got[1].get("kernels") != n:
            return None
        tab = got[0]
        sums = tab["sum_ns"].to_numpy().astype(np.float64) / 1e3
        rows += [(r, nm, s, c) for nm, s, c in zip(tab["name"].to_pylist(), sums.tolist(),
                                                  tab["count"].to_pylist(), strict=True)]  # fmt: skip
    # ORDER BY rank, name (DuckDB: byte order, as Python's for str; NULL last)
    rows.sort(key=lambda x: (x[0], x[1] is None, x[1] or ""))
    out = pd.DataFrame(rows, columns=["rank", "name", "sum", "count"])
    return out.astype({"rank": np.int64, "sum": np.float64, "count": np.int64})


def timeline(
    run: Any,
    rank: int,
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    want: list[int] | None = None,
    max_kernels: int = TIMELINE_KERNELS,
    noun: str = "steps",
    first: int = TIMELINE_STEPS,
    passes: Sequence[int] = (),
    host: TraceSyncs | None = None,
    policy: str = "",
) -> Timeline | None:
    """Steps of a rank (``want``, default the first ``first``) with their layers and kernels
    (at most ``max_kernels``), on one µs axis; ``noun``: what ``steps`` are
    (:attr:`Timeline.noun`). A step in ``want`` that ``steps`` does not hold is an error
    (:func:`window_steps`, ``passes``: the rank's drafter passes), for a Run and for frames
    alike: never every step drawn as the window asked for. ``host``: an imported trace's
    host-sync check where it is the run's sync count
    (:func:`mlaprof.analysis.syncs.counted_by_host`): its layers' syncs are its counts.
    ``policy``: the run's split policy, where its steps' kernel decided S on the device a layer's
    S reads as the grid's cap (:func:`mlaprof.analysis.splits.grid_caps`), never as an S used."""
    from mlaprof.analysis.step_syncs import fill_host_syncs
    from mlaprof.store.schema import columns

    if want is not None:
        window_steps(tuple(want), steps, list(passes), rank)

    st = _num(steps, "step", "t_start_ns", "duration_ns", "num_reqs")
    capped = grid_caps(steps, layers, policy) if not layers.empty else None
    ly = _num(layers, "step", "layer", "t_start_ns", "duration_ns", "syncs")
    ly = ly.assign(s_capped=False if capped is None else capped.to_numpy())
    st = st.dropna(subset=["t_start_ns", "duration_ns"])
    ly = ly.dropna(subset=["t_start_ns", "duration_ns"])
    total = int(steps["step"].nunique()) if not steps.empty else 0
    timed = "rank = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL"
    where, params = timed, [rank]
    have = sorted(int(s) for s in st["step"].dropna().unique())
    chosen = have[: max(0, first)] if want is None else [x for x in want if x in set(have)]
    if want is not None and not chosen and not steps.empty:
        return None  # the steps asked for are held, none of them timed: nothing to draw
    if chosen:
        st = st[st["step"].isin(chosen)]
        ly = ly[ly["step"].isin(chosen)]
        lo = st["t_start_ns"].min()
        hi = (st["t_start_ns"] + st["duration_ns"]).max()
        where += (f" AND (step IN ({', '.join('?' * len(chosen))}) OR (step IS NULL AND "
                  "start_ns < ? AND end_ns > ?))")  # fmt: skip
        params += [*chosen, int(hi), int(lo)]
    # the layers' sync counts as the sync-count section states them (the steps drawn only)
    ly = fill_host_syncs(ly, host, steps)
    kn = pd.DataFrame(columns=list(columns("kernels")))
    shown = 0
    frame = run.get("kernels") if isinstance(run, Mapping) else None
    if frame is not None and not frame.empty:  # a kernels frame handed over: the same window
        k = frame[(pd.to_numeric(frame["rank"]) == rank) & frame["start_ns"].notna()
                  & frame["end_ns"].notna()]  # fmt: skip
        if chosen:
            k = k[k["step"].isin(chosen) | (k["step"].isna() & (k["start_ns"] < hi)
                                             & (k["end_ns"] > lo))]  # fmt: skip
        shown = len(k)
        kn = k.sort_values("start_ns", kind="stable").head(int(max_kernels))
        kn = kn[[c for c in columns("kernels") if c in kn.columns]].reset_index(drop=True)
    elif is_run(run):
        # the columns the bars are drawn from (the others cost their conversion, ~2 ms a rank)
        # a name is shown shortened (textsafe.short): shortened in the query, a 10 MB one is
        # never sorted whole
        cols = ", ".join(sql_head(c) if c == "name" else c
                         for c in columns("kernels") if c in TIMELINE_COLUMNS)  # fmt: skip
        # the count and the first kernels in one query over this rank's databases and files
        # only (a query builds its views over the files once)
        got = run.query(f"SELECT {cols}, (SELECT COUNT(*) FROM kernels WHERE {where}) AS n_all "
                        f"FROM kernels WHERE {where} ORDER BY start_ns, end_ns, stream, name "
                        f"LIMIT {max(1, int(max_kernels))}", (*params, *params),
                        ranks=(rank,), portable=True)  # fmt: skip
        shown = int(got.pop("n_all").iloc[0]) if len(got) else 0
        got = got.head(int(max_kernels))
        if shown:
            chars = got.pop("name_chars")
            got["name"] = [short_of(h, c) for h, c in zip(got["name"], chars, strict=True)]
            kn = got
    kn = _num(kn, "step", "layer", "start_ns", "end_ns", "stream", "splits")
    if st.empty and ly.empty and kn.empty:
        return None
    t0 = min(s for s in (st["t_start_ns"].min(), ly["t_start_ns"].min(), kn["start_ns"].min())
             if s == s)  # fmt: skip
    bars: list[Bar] = []
    lanes: list[str] = []
    # rows as columns of Python values (iterating a frame's rows costs ~10 us a row)
    if not st.empty:
        lanes.append("steps")
        # keyed by how each step ran (analysis.timing.step_modes: a CPU step ran its mode's
        # shape eagerly, never "FULL graph" beside a capture that predicts PIECEWISE)
        st = st.assign(ran=step_modes(st).to_numpy())
        for step, t_start, dur, g_mode, timing, reqs in column_rows(
            st, "step", "t_start_ns", "duration_ns", "ran", "timing", "num_reqs"
        ):
            mode = _s(g_mode) or "?"
            # an unrecorded timing is None (reads "unknown"), never "" (reads "none")
            bars.append(Bar("steps", f"step:{mode}", round((t_start - t0) / 1e3, 3),
                            dur / 1e3, f"step {int(step)}",
                            (int(step), _s(timing) or None, _i(reqs))))  # fmt: skip
    if not ly.empty:
        lanes.append("layers")
        for step, layer, t_start, dur, syncs, used, deserved, cap in column_rows(
            ly, "step", "layer", "t_start_ns", "duration_ns", "syncs", "splits_used",
            "splits_deserved", "s_capped",
        ):  # fmt: skip
            flag = "unwatched" if syncs != syncs else ("sync" if syncs > 0 else "clean")
            s_used = _i(used)
            said_used = device_cap_text(s_used) if cap and s_used is not None else s_used
            bars.append(Bar("layers", f"layer:{flag}", round((t_start - t0) / 1e3, 3),
                            dur / 1e3, f"L{int(layer)}",
                            (int(step), int(layer), _i(syncs), said_used,
                             _i(deserved))))  # fmt: skip
    if not kn.empty:
        kn = kn.assign(
            lane=["kernels" if s != s else f"kernels, stream {int(s)}" for s in kn["stream"]],
            dur=kn["end_ns"] - kn["start_ns"],
        )
        lanes.extend(sorted(kn["lane"].unique()))
        top = kn.groupby("name")["dur"].sum().sort_values(ascending=False).index[:TIMELINE_TOP]
        top_set = set(top)
        for name, lane, start, dur, splits, layer in column_rows(
            kn, "name", "lane", "start_ns", "dur", "splits", "layer"
        ):
            label = kernel_label(name) if name in top_set else "other kernels"  # label: cached
            bars.append(Bar(lane, f"kernel:{label}", round((start - t0) / 1e3, 3),
                            dur / 1e3, str(name), (_i(splits), _i(layer))))  # fmt: skip
    return Timeline(tuple(chosen), total, min(shown, max_kernels), shown, tuple(lanes),
                    tuple(bars), noun)  # fmt: skip


def rank_series(
    tables: dict[str, pd.DataFrame],
    rank: int,
    layer_rows: list[LayerRow],
    sc: Scenario,
    run: Any = None,
    kernels: pd.DataFrame | None = None,
    shadow_steps: list[ShadowStep] | None = None,
    timing: Timing | None = None,
    stands: Callable[[str], bool] | None = None,
    frozen_if: str | None = None,
    step_noun: str = "steps",
    window: Window | None = None,
    device: str = "",
    host: TraceSyncs | None = None,
    what_if: Callable[[str], str | None] | None = None,
) -> RankSeries:
    """``timing``: the timing analyzer's summary of ``tables``' steps and layers (the run's
    timing section), used where this rank's rows are all of them; ``sc``: the run's scenario;
    ``stands``: where a modelled frozen S stands (:func:`mlaprof.analysis.splits.frozen_rule`);
    ``frozen_if``: the condition it holds on (:func:`mlaprof.analysis.splits.frozen_condition`);
    ``window``: the timeline's steps and kernel cap where not the summary's; ``device``: where
    the run's numbers were measured (the split scope's, :func:`headline.splits_scope`);
    ``host``: the host-sync check the timeline's layers read (:func:`timeline`); ``what_if``:
    the condition a policy's frozen S holds on where vLLM does not run it
    (:func:`mlaprof.analysis.splits.what_if_rule`)."""
    t = {k: _by_rank(v, rank) for k, v in tables.items()}
    steps, layers = t.get("steps", pd.DataFrame()), t.get("layers", pd.DataFrame())
    whole = steps is tables.get("steps") and layers is tables.get("layers")
    by_mode = timing.by_mode if timing is not None and whole else None
    # a kernel its target cannot run is not runnable, as in the splits rows (splits.on_target)
    points = split_points(on_target(t["splits"]), stands, what_if) if "splits" in t else ()
    targets = t["splits"]["target"].dropna() if "splits" in t and not t["splits"].empty else []
    served, served_layers = served_steps(steps, layers) if not steps.empty else (steps, layers)
    lt, lt_steps = layer_times(served_layers) if not layers.empty else ((), 0)
    kt = kernel_times(kernels) if kernels is not None else ()
    pad = t.get("padding", pd.DataFrame())
    pad_total, kv_real = padding_totals(pad)
    return RankSeries(
        rank=rank,
        policy=sc.policy,
        target=str(targets.iloc[0]) if len(targets) else sc.target,
        modes=mode_timing(steps, layers, by_mode, served) if not steps.empty else (),
        splits=points,
        split_medians=split_medians(points),
        occupancy=occupancy_medians(points),
        layer_s=layer_s(layer_rows, rank),
        layer_time=lt,
        layer_time_steps=lt_steps,
        kernels=kt,
        padding=pad_total,
        kv_bytes_real=kv_real,
        padding_steps=padding_steps(pad),
        memory=memory_bars(t["memory"]) if "memory" in t and not t["memory"].empty else (),
        failed_captures=failed_captures(t["captures"]) if "captures" in t else (),
        timeline=_timeline(run, rank, steps, layers, step_noun, window, host, sc.policy or "")
        if run is not None or not steps.empty
        else None,
        shadow=tuple(x for x in (shadow_steps or []) if x.rank == rank),
        frozen_if=frozen_if if any(p.frozen is not None for p in points) else None,
        split_scope=splits_scope(points, sc.policy, device),
    )


def _timeline(
    run: Any,
    rank: int,
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    noun: str,
    w: Window | None,
    host: TraceSyncs | None = None,
    policy: str = "",
) -> Timeline | None:
    if w is None:
        return timeline(run, rank, steps, layers, noun=noun, host=host, policy=policy)
    want = None if w.steps is None else list(w.steps)
    return timeline(run, rank, steps, layers, want, w.max_kernels, noun, w.first, w.passes,
                    host, policy)  # fmt: skip


def build_series(
    ev: Any,
    layer_rows: list[LayerRow],
    shadow: ShadowSection | None,
    run: Run | None = None,
    timing: Timing | None = None,
    stands: Callable[[str], bool] | None = None,
    frozen_if: str | None = None,
    window: Window | None = None,
    what_if: Callable[[str], str | None] | None = None,
) -> Series:
    """The figure section of a run's summary (``ev``: its :class:`~mlaprof.analysis.evidence.
    Evidence`; ``layer_rows``: the summary's layer table; ``shadow``: its shadow section;
    ``timing``: its timing section, of the same steps and layers; ``stands``: where the run's
    modelled frozen S stands, the summary's rule, :func:`mlaprof.analysis.splits.frozen_rule`;
    ``frozen_if``: the condition it holds on, :func:`mlaprof.analysis.splits.frozen_condition`;
    ``window``: another timeline window of the rank it names, over the same steps; ``what_if``:
    the condition a frozen S of a policy off the route holds on, the summary's rule,
    :func:`mlaprof.analysis.splits.what_if_rule`)."""
    from mlaprof.analysis.syncs import counted_by_host

    meta = ev.meta
    kernels = _kernels_per_rank(run)
    # the sync count's source, decided once for every rank (the summary's sync_counts rule)
    host = counted_by_host(ev.tables["layers"], ev.tables["syncs"], getattr(ev, "host_syncs", None))
    per_step = list(shadow.per_step) if shadow is not None else []
    ranks = sorted(set(ev.ranks) | set(kernels) | {int(s.rank) for s in per_step})
    # an imported trace whose drafter passes were told apart: its steps are verify steps
    trace = getattr(ev, "trace", None)
    drafter = trace.drafter if trace is not None else None
    noun = "verify steps" if drafter is not None else "steps"
    drawn = None
    if window is not None and ranks:
        drawn = ranks[0] if window.rank is None else window.rank
        if drafter:  # the window's steps are checked where it is drawn (timeline)
            window = replace(window, passes=tuple(drafter.pass_steps.get(drawn, [])))
    return Series(
        run=ev.name,
        ranks=tuple(
            rank_series(
                ev.tables,
                r,
                layer_rows,
                meta.scenario,
                run,
                kernels.get(r),
                per_step,
                timing,
                stands,
                frozen_if,
                noun,
                window if r == drawn else None,
                str(ev.device),
                host,
                what_if,
            )  # fmt: skip
            for r in ranks
        ),
        engine=ev.records_engine,
        shadow_title=f"AITER {shadow.aiter} on {shadow.device}" if shadow else "",
        info=RunInfo(
            created=meta.created,
            source=meta.source,
            versions=dict(meta.versions),
            git=meta.git,
            reason=_s(getattr(run, "reason", None)) if run is not None else None,
            created_label="imported" if meta.imported else "created",
            importer_versions=meta.importer_versions,
        ),
    )


def series_for_run(
    run: Run, shadow: dict[str, str] | None = None, window: Window | None = None
) -> Series:
    """The series of a Run without its findings (a notebook's figure): the same evidence, layer
    table and shadow analysis :func:`mlaprof.analysis.run_summary.build_summary` uses;
    ``window``: another timeline window of one rank, over the steps the report counts (the
    evidence's: an imported trace's drafter passes and start-up warm-ups left out)."""
    from mlaprof.analysis.claims import claims_of
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.layers import layer_table
    from mlaprof.analysis.paths import route_summary
    from mlaprof.analysis.served import served_analysis

    ev = collect(run)
    t = ev.tables
    sh = served_analysis(ev.engine_steps, ev.acceptance, **(shadow or {}))[1]
    replayed = replayed_splits(t["steps"], t["layers"], ev.scenario.policy or "")
    claims = claims_of(ev)
    stands = frozen_rule(ev.scenario.policy or "", claims.full_graph, replayed)
    capped = grid_caps(t["steps"], t["layers"], ev.scenario.policy or "")
    layers = layer_table(t["layers"], t["syncs"], ev.reference, capped)
    return build_series(
        ev,
        layers,
        sh,
        run,
        stands=stands,
        frozen_if=frozen_condition(claims.capture_status),
        window=window,
        what_if=what_if_rule(route_summary(ev.meta)),  # the summary's route and rule
    )


def series_from_tables(
    tables: dict[str, pd.DataFrame], meta: dict[str, Any] | None = None, name: str = ""
) -> Series:
    """The series of bare tables (a notebook's filtered frames): the layer table from the same
    analyzer the summary uses, the kernel times of a kernels frame; no shadow."""
    from mlaprof.analysis.evidence.model import run_meta
    from mlaprof.analysis.layers import layer_table
    from mlaprof.store.schema import TABLES, columns

    full = {}
    for tname in TABLES:
        df = tables.get(tname)
        df = pd.DataFrame(columns=list(columns(tname))) if df is None else df.copy()
        for c in columns(tname):
            if c not in df.columns:
                df[c] = pd.NA
        if "rank" not in df.columns:
            df["rank"] = 0
        full[tname] = df
    ranks = sorted({int(r) for df in full.values() for r in pd.to_numeric(df["rank"]).dropna()})
    layers = layer_table(full["layers"], full["syncs"]) if not full["layers"].empty else []
    rm = run_meta(meta or {})
    sc, device = rm.scenario, str(rm.device or "")
    kernels = _kernels_per_rank(None, tables.get("kernels"))
    return Series(
        run=name,
        ranks=tuple(
            rank_series(full, r, layers, sc, tables, kernels.get(r), device=device)
            for r in sorted(set(ranks) | set(kernels))
        ),
        engine=False,
        shadow_title="",
        info=None,
    )


# -- kernel names (shared with the figures) ---------------------------------------------------


@functools.lru_cache(maxsize=1 << 16)
def kernel_label(name: str, width: int = 48) -> str:
    """A demangled kernel name without ``void`` and its argument list, shortened (a pure
    function of the name, kept for the names seen: a fleet's ranks share theirs)."""
    name = str(name).strip().removeprefix("void ")
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth <= 0 and i > 0:
            name = name[:i]
            break
    return shorten(name, width)


def shorten(name: str, width: int = 48) -> str:
    """Keep the head and the tail of a long name."""
    name = str(name)
    if len(name) <= width:
        return name
    half = (width - 1) // 2
    return name[:half] + "…" + name[-(width - 1 - half) :]

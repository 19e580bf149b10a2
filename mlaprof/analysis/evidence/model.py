"""The typed evidence every run kind is turned into, and the one capture vocabulary.

A run's kind (:class:`mlaprof.store.runkind.RunKind`) picks its adapter; each adapter returns an
:class:`Evidence`: the run's tables (every row keyed by rank, step and layer), its capture evidence
in one :class:`CaptureStatus` vocabulary, and where each part came from (:class:`Provenance`).
The analyzers read only this.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture_status import (  # noqa: F401 - the evidence model's vocabulary
    CAPTURE_LABELS,
    NO_FULL_GRAPH,
    CaptureStatus,
    asked_mode,
    no_full_graph,
    would_run_text,
)
from mlaprof.analysis.section_base import Section, section
from mlaprof.analysis.sections import Route, Scenario, TraceChecks
from mlaprof.rank_counts import plural

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.analysis.sections import (
        Capture,
        EngineGroup,
        EngineStart,
        TraceCoverage,
        TraceCpu,
        TracePath,
        TraceSection,
        TraceSyncs,
        TraceTrust,
    )
    from mlaprof.analysis.step_records import Acceptance, EngineStep
    from mlaprof.store.runkind import RunKind


@dataclass(frozen=True)
class Provenance:
    """Where a number or verdict came from."""

    how: str  # measured | modelled | imported | unknown
    detail: str  # on which device, by which rule, from which file, or why unknown

    def __str__(self) -> str:
        if self.how == "unknown":
            return f"unknown ({self.detail})" if self.detail else "unknown"
        return f"{self.how} {self.detail}".strip()


def unknown(why: str) -> str:
    """How every view shows a value the evidence does not hold."""
    return f"unknown ({why})"


def capture_text(cap: dict[str, Any]) -> str:
    """The capture line every view prints: mode asked -> status (mode that ran), each part only
    where the evidence holds it; a prediction (``predicted_mode``) is said as one, beside what
    the steps ran ("FULL -> predicted-fail (would run PIECEWISE on a GPU: predicted from syncs;
    ran FULL shape on cpu)"); a per-rank status says its label, naming each rank's (the ranks
    ran their own modes: each rank's row)."""
    label = str(cap.get("label") or cap.get("status"))
    mode, eff, pred = cap.get("mode"), cap.get("effective_mode"), cap.get("predicted_mode")
    if str(cap.get("status")) == CaptureStatus.PER_RANK:
        return f"{mode} -> {label}" if mode else label
    head = label if str(cap.get("status")) == CaptureStatus.UNKNOWN else cap.get("status")
    if mode and pred:
        ran = f"; ran {eff}" if eff else ""
        return f"{mode} -> {head} ({would_run_text(pred, eff)}{ran})"
    if mode and eff:
        return f"{mode} -> {head} (runs {eff})"
    return label


@section
class RankSource(Section):
    """Where one rank ran (run.json's ``rank_sources``: a launcher, mlaprof.multirank
    .rank_sources, or an import's files, mlaprof.importers.rocprof.rank_sources)."""

    rank: int | None
    host: str | None = None
    pid: int | None = None
    agent: int | str | None = None  # the GPU agent, or "cpu"
    dp_group: int | None = None  # the DP group the launcher placed the rank in
    dp_rank: int | None = None  # the DP rank an import read off the rank's files
    placed_by: str | None = None  # the launcher that placed it
    files: list[str] = field(default_factory=list)  # an import's files of this rank


@section
class GridAxes(Section):
    """Where an import's matched stage-1 kernel of a path holds S, the batch rows and qlen on
    its grid (run.json's ``kernel_patterns``: the kernel table rows the import matched); None:
    no grid axis holds it ("device": S is decided on the device)."""

    split_axis: str | None = None
    rows_axis: str | None = None
    qlen_axis: str | None = None


@section
class CpuTraceRank(Section):
    """One rank of a CPU-only profiler trace as the import counted it (run.json's
    ``cpu_trace``, mlaprof.importers.kineto); a count an older import did not write is 0."""

    cpu_only: bool = False
    device: str | None = None
    vllm_version: str | None = None
    step_annotations: int = 0
    empty_annotations: int = 0  # annotations with nothing scheduled: not steps
    mla_ops: int = 0
    mla_ops_in_steps: int = 0
    cpu_ops: int = 0
    backend_ops: dict[str, int] = field(default_factory=dict)


@section
class RunMeta(Section):
    """What the analyzers read of a run's ``run.json`` (mlaprof.store.runmeta writes it; an
    importer adds where the data came from), typed where the evidence is collected."""

    name: str
    scenario: Scenario  # every field None for a run without one (an import, an engine)
    backend: str | None = None  # the backend a scenario run ran
    device: str | None = None
    threads: int | None = None  # torch's CPU threads the steps ran with
    route: Route | None = None  # the verify route recorded at run start
    rank_sources: list[RankSource] = field(default_factory=list)
    imported_from: str | None = None
    format: str | None = None  # the imported trace's format
    device_source: str | None = None  # the imported records ``device`` was read from
    # the imported folder's files passed over (kinds mlaprof does not read), relative to it
    not_read: list[str] = field(default_factory=list)
    # the mlaprof run an imported rocpd export was made of (its run.json carried over)
    exported_from: str | None = None
    source: str | None = None  # what wrote the run (cpu, gpu, rocprof, kineto, vllm-log, ...)
    vllm: str | None = None  # an engine's vLLM version
    versions: dict[str, str | None] = field(default_factory=dict)
    created: str | None = None
    git: str | None = None
    # an imported trace's own checks (heads, stage 2, qlen), None for other kinds
    trace_checks: TraceChecks | None = None
    # an import's matched stage-1 kernels: per path, which grid axes hold S, rows and qlen
    stage1_axes: dict[str, GridAxes] = field(default_factory=dict)
    # a CPU-only profiler trace's ranks as counted at import (None: not a CPU trace)
    cpu_trace: dict[int, CpuTraceRank] | None = None

    @property
    def imported(self) -> bool:
        """Whether an importer made this run (its run.json names what it was imported from):
        the one decision behind the summary's ``imported`` section and the run's date label."""
        return bool(self.imported_from)

    @property
    def importer_versions(self) -> bool:
        """Whether run.json's versions and git revision are the importing machine's: an import,
        unless it carried over the run.json of the mlaprof run it was exported from."""
        return self.imported and not self.exported_from

    @property
    def origin(self) -> str:
        """Where an imported run's numbers come from, as every finding says it."""
        return f"imported from {self.imported_from or '?'}"


def run_meta(meta: Mapping[str, Any], trace_checks: TraceChecks | None = None) -> RunMeta:
    """``run.json`` as :class:`RunMeta`: the keys analyzers read, each of its type (a scenario
    key :class:`Scenario` does not declare is refused: one clear error, never dropped)."""
    from mlaprof.errors import MlaprofError

    sc = meta.get("scenario")
    sc = sc if isinstance(sc, Mapping) else {}
    unknown_keys = sorted(set(sc) - set(Scenario.__dataclass_fields__))
    if unknown_keys:
        raise MlaprofError(
            f"run.json's scenario has {plural('key(s)', len(unknown_keys))} mlaprof does not "
            f"know: {unknown_keys}"
        )
    route = meta.get("route")
    versions = meta.get("versions")
    return RunMeta(
        name=str(meta.get("name") or ""),
        scenario=Scenario(**{k: v for k, v in sc.items() if v is not None}),
        backend=_str(meta.get("backend")),
        device=_str(meta.get("device")),
        threads=meta.get("threads"),
        route=Route.recorded(route) if isinstance(route, Mapping) and route.get("path") else None,
        rank_sources=[
            RankSource(**{k: v for k, v in r.items() if k in RankSource.__dataclass_fields__})
            for r in meta.get("rank_sources") or []
            if isinstance(r, Mapping)
        ],
        imported_from=_str(meta.get("imported_from")),
        format=_str(meta.get("format")),
        device_source=_str(meta.get("device_source")),
        not_read=[str(x) for x in meta.get("not_read") or [] if isinstance(x, str)],
        exported_from=_str(meta.get("exported_from")),
        source=_str(meta.get("source")),
        vllm=_str(meta.get("vllm")),
        versions={str(k): _str(v) for k, v in versions.items()}
        if isinstance(versions, Mapping)
        else {},
        created=_str(meta.get("created")),
        git=_str(meta.get("git")),
        trace_checks=trace_checks,
        stage1_axes=_stage1_axes(meta.get("kernel_patterns")),
        cpu_trace=_cpu_trace(meta.get("cpu_trace")),
    )


def _stage1_axes(rows: Any) -> dict[str, GridAxes]:
    """Per path, the grid axes of the stage-1 kernel table row the import matched."""
    keep = GridAxes.__dataclass_fields__
    return {
        str(r["path"]): GridAxes(**{k: _str(v) for k, v in r.items() if k in keep})
        for r in rows or []
        if isinstance(r, Mapping) and r.get("role") == "stage1" and r.get("path")
    }


def _cpu_trace(ranks: Any) -> dict[int, CpuTraceRank] | None:
    """Each rank's CPU trace counts (keys an import wrote that the analysis does not read are
    left out: they are the import's report, not evidence)."""
    if not isinstance(ranks, Mapping):
        return None
    keep = CpuTraceRank.__dataclass_fields__
    out = {}
    for rank, c in ranks.items():
        if isinstance(c, Mapping):
            items = {k: v for k, v in c.items() if k in keep and v is not None}
            if "backend_ops" in items:
                items["backend_ops"] = {str(k): int(v) for k, v in items["backend_ops"].items()}
            out[int(rank)] = CpuTraceRank(**items)
    return out


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass
class Evidence:
    """One run, as every analyzer sees it. Tables are the run's (rank column on every row);
    ``capture`` is the capture evidence in the one vocabulary; ``trace`` the imported trace's
    evidence (per rank), ``None`` for other kinds."""

    kind: RunKind
    name: str
    status: str
    meta: RunMeta
    ranks: list[int]
    tables: dict[str, pd.DataFrame]
    capture: Capture
    device: str  # the device the numbers were measured on, or "unknown (why)"
    provenance: Provenance  # where the run's measured numbers come from
    trace: TraceSection | None = None
    starts: list[EngineStart] = field(default_factory=list)  # an engine log's server starts
    # rank, step, fix: the S a trace's steps are judged against (their grids count padding rows)
    reference: pd.DataFrame | None = None
    # rank, step -> n_layers, S, median_ns: a trace's per-step layer aggregates (step_stats)
    step_stats: pd.DataFrame | None = None
    # what the rows of kernel grids say, per question (None / empty: the run holds no such rows)
    kernel_paths: list[TracePath] = field(default_factory=list)  # path, variant, S, rows
    step_modes: Capture | None = None  # capture verdict from each step's kernels
    trust: TraceTrust | None = None  # the import's own checks (replays, launches, stage 2)
    trust_by_rank: dict[int, str] | None = None  # each rank's verdict from its own checks
    # each rank's trust from its own checks (the findings name the unreliable ranks from it)
    rank_trust: dict[int, TraceTrust] | None = None
    host_syncs: TraceSyncs | None = None  # host calls placed in MLA layer windows
    coverage: TraceCoverage | None = None  # which kernels the import recognised, per rank
    cpu: TraceCpu | None = None  # a CPU-only trace's steps and attention op, per rank
    # the engines a trace's ranks show (analysis.engines; None: one rank, or no such evidence)
    engines: list[EngineGroup] | None = None
    # an engine's own records: the worker's per-step rows and the scheduler's acceptance
    engine_steps: list[EngineStep] = field(default_factory=list)
    acceptance: list[Acceptance] = field(default_factory=list)
    # the rule each EngineCore's rank<N>.scheduler.db recorded naming N, by N (its meta
    # vllm_names.RANK_SOURCE_KEY); a rank absent recorded none (a run before the plugin did)
    scheduler_rules: dict[int, str] = field(default_factory=dict)
    # a live engine recorded this run (its steps may not be in yet): the engine views apply
    records_engine: bool = False

    @property
    def scenario(self) -> Scenario:
        return self.meta.scenario

    @property
    def graph_mode(self) -> str:
        """The graph mode the run asked for (:func:`mlaprof.analysis.capture_status.asked_mode`),
        else FULL (a trace says none)."""
        return str(asked_mode(self.scenario.graph_mode, self.capture.mode) or "FULL")

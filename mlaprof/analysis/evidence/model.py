"""The typed evidence every run kind is turned into, and the one capture vocabulary.

A run's kind (:class:`mlaprof.store.runkind.RunKind`) picks its adapter; each adapter returns an
:class:`Evidence`: the run's tables (every row keyed by rank, step and layer), its capture evidence
in one :class:`CaptureStatus` vocabulary, and where each part came from (:class:`Provenance`).
The analyzers read only this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture_status import (  # noqa: F401 - the evidence model's vocabulary
    CAPTURE_LABELS,
    NO_FULL_GRAPH,
    CaptureStatus,
    no_full_graph,
)

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.analysis.run_checks import RunChecks
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
    where the evidence holds it."""
    label = str(cap.get("label") or cap.get("status"))
    mode, eff = cap.get("mode"), cap.get("effective_mode")
    if mode and eff:
        return f"{mode} -> {cap['status']} (runs {eff})"
    return label


@dataclass
class Evidence:
    """One run, as every analyzer sees it. Tables are the run's (rank column on every row);
    ``capture`` is the capture evidence in the one vocabulary; ``trace`` the imported trace's
    evidence (per rank), ``None`` for other kinds."""

    kind: RunKind
    name: str
    status: str
    meta: dict[str, Any]
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
    host_syncs: TraceSyncs | None = None  # host calls placed in MLA layer windows
    coverage: TraceCoverage | None = None  # which kernels the import recognised, per rank
    cpu: TraceCpu | None = None  # a CPU-only trace's steps and attention op, per rank
    # the engines a trace's ranks show (analysis.engines; None: one rank, or no such evidence)
    engines: list[EngineGroup] | None = None
    # an engine's own records: the worker's per-step rows and the scheduler's acceptance
    engine_steps: list[EngineStep] = field(default_factory=list)
    acceptance: list[Acceptance] = field(default_factory=list)
    # a live engine recorded this run (its steps may not be in yet): the engine views apply
    records_engine: bool = False
    # an import's trace checks, each rank's (from the store's trace_checks table)
    checks: RunChecks | None = None

    @property
    def scenario(self) -> dict[str, Any]:
        sc = self.meta.get("scenario")
        return sc if isinstance(sc, dict) else {}

    @property
    def graph_mode(self) -> str:
        return str(self.scenario.get("graph_mode", "FULL"))

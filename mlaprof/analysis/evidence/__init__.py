"""Evidence: one adapter per run kind turns a run into the same typed :class:`Evidence`.

``collect(run)`` reads the run's kind (``run.json``'s ``kind``, :mod:`mlaprof.store.runkind`)
and calls that kind's adapter; nothing else dispatches on where a run came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mlaprof.analysis.evidence.engine import engine_evidence
from mlaprof.analysis.evidence.log import log_evidence
from mlaprof.analysis.evidence.model import (
    CaptureStatus,
    Evidence,
    Provenance,
    capture_text,
    no_full_graph,
    unknown,
)
from mlaprof.analysis.evidence.scenario import scenario_evidence
from mlaprof.analysis.evidence.trace import trace_evidence
from mlaprof.store.runkind import RunKind, run_kind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

ADAPTERS: dict[RunKind, Callable[[Run], Evidence]] = {
    RunKind.SCENARIO: scenario_evidence,
    RunKind.ENGINE: engine_evidence,
    RunKind.TRACE: trace_evidence,
    RunKind.LOG: log_evidence,
}


# the kinds whose evidence is the committed rows alone (their adapters read nothing else); an
# imported trace or log is written once and its adapter reads the files beside the databases
ROWS_ONLY = frozenset({RunKind.SCENARIO, RunKind.ENGINE})


def folds_live(meta: dict) -> tuple[bool, str]:
    """Whether a run's evidence can be folded from its committed rows as they land
    (``(True, "")``), or ``(False, why)`` where its adapter needs the full pass."""
    kind = run_kind(meta)
    if kind in ROWS_ONLY:
        return True, ""
    return False, f"{kind} runs: waiting for the full analysis"


def collect(run: Run) -> Evidence:
    """The run's evidence, from the adapter of its kind."""
    return ADAPTERS[run_kind(run.meta)](run)


__all__ = [
    "ADAPTERS",
    "CaptureStatus",
    "Evidence",
    "Provenance",
    "RunKind",
    "capture_text",
    "collect",
    "folds_live",
    "no_full_graph",
    "run_kind",
    "unknown",
]

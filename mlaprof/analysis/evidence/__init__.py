"""Evidence: one adapter per run kind turns a run into the same typed :class:`Evidence`.

``collect(run)`` reads the run's kind (``run.json``'s ``kind``, :mod:`mlaprof.store.runkind`)
and calls that kind's adapter; nothing else dispatches on where a run came from.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from mlaprof.analysis.evidence.model import (
    CaptureStatus,
    Evidence,
    Provenance,
    capture_text,
    no_full_graph,
    unknown,
)
from mlaprof.store.runkind import ROWS_ONLY, RunKind, run_kind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

# each kind's adapter: its module under mlaprof.analysis.evidence and its function, imported
# when a run of that kind is read (a scenario run's report loads none of the analyses only an
# imported trace's adapter calls)
ADAPTERS: dict[RunKind, tuple[str, str]] = {
    RunKind.SCENARIO: ("scenario", "scenario_evidence"),
    RunKind.ENGINE: ("engine", "engine_evidence"),
    RunKind.TRACE: ("trace", "trace_evidence"),
    RunKind.LOG: ("log", "log_evidence"),
}


def adapter(kind: RunKind) -> Callable[[Run], Evidence]:
    """The evidence adapter of runs of ``kind``."""
    module, name = ADAPTERS[kind]
    return getattr(importlib.import_module(f"mlaprof.analysis.evidence.{module}"), name)


def folds_live(meta: dict) -> tuple[bool, str]:
    """Whether a run's evidence can be folded from its committed rows as they land
    (``(True, "")``), or ``(False, why)`` where its adapter needs the full pass."""
    kind = run_kind(meta)
    if kind in ROWS_ONLY:
        return True, ""
    return False, f"{kind} runs: waiting for the full analysis"


def collect(run: Run) -> Evidence:
    """The run's evidence, from the adapter of its kind."""
    return adapter(run_kind(run.meta))(run)


__all__ = [
    "ADAPTERS",
    "CaptureStatus",
    "Evidence",
    "Provenance",
    "RunKind",
    "adapter",
    "capture_text",
    "collect",
    "folds_live",
    "no_full_graph",
    "run_kind",
    "unknown",
]

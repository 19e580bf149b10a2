"""The findings of an engine's server starts (an imported vLLM log), start by start in the order
the log holds them: each start's downgrades, capture memory, stopped captures and acceptance, then
what differs between starts. Each question's own analyzer says it; this only keeps their order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.downgrades import (
    mode_change_findings,
    progress_findings,
    start_downgrade_findings,
)
from mlaprof.analysis.drafter import acceptance_findings
from mlaprof.analysis.memory import start_memory_findings

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.analysis.sections import EngineStart


def start_findings(starts: list[EngineStart]) -> list[Finding]:
    """Every finding of the server starts (none for a run without any)."""
    out: list[Finding] = []
    for st in starts:
        out += start_downgrade_findings(st)
        out += start_memory_findings(st)
        out += progress_findings(st)
        out += acceptance_findings(st)
    out += mode_change_findings(starts)
    return out

"""Analyzers, one per question (DESIGN.md), over a stored run's tables; the one place that
computes findings, summaries and run diffs (every view renders what these return).

``analyze(run)`` returns findings sorted by severity; ``summary(run)`` the report's JSON object;
``mlaprof.analysis.diff.diff_runs(a, b)`` the run diff.

The names below load on first use: importing one analyzer module (``mlaprof.analysis.timing``
for a default, say) does not import pandas and every analyzer with it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.analysis.run_summary import analyze, summary

_WHERE = {
    "Finding": "mlaprof.analysis.findings",
    "analyze": "mlaprof.analysis.run_summary",
    "summary": "mlaprof.analysis.run_summary",
}
__all__ = ["Finding", "analyze", "summary"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)

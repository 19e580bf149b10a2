"""Analyzers, one per question (DESIGN.md), over a stored run's tables; the one place that
computes findings, summaries and run diffs (every view renders what these return).

``analyze(run)`` returns findings sorted by severity; ``summary(run)`` the report's JSON object;
``mlaprof.analysis.diff.diff_runs(a, b)`` the run diff.
"""

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.run_summary import analyze, summary

__all__ = ["Finding", "analyze", "summary"]

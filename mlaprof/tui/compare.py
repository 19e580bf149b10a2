"""The compare screen's and ``--once --compare``'s table: the run diff of
:mod:`mlaprof.analysis.diff` (the one the report prints) as the rows layer lays it out
(:func:`mlaprof.reporters.diff_rows.diff_block`: the same rows, verdicts and workload line as
``report --compare`` in each of its formats)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.diff import diff
from mlaprof.reporters.diff_rows import HEAD, diff_block

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary

__all__ = ["HEAD", "compare_rows", "compare_table"]

ANALYSING = [["analysing...", "", "", "", ""]]


def compare_table(
    sa: RunSummary | None, sb: RunSummary | None, short: bool = False
) -> tuple[list[list[str]], str]:
    """(rows, legend): the diff block's table rows, and its rows (whether the workloads match,
    where the marked numbers come from) as one line each."""
    if sa is None or sb is None:
        return ANALYSING, ""
    b = diff_block(diff(sa, sb), short)
    # the marks' sources on one line (a dashboard's height is the table's): "*: ...; **: ..."
    marks = [f"{r.label}: {r.text}" for r in b.rows if r.label.startswith("*")]
    said = [f"{r.label}: {r.text}" for r in b.rows if not r.label.startswith("*")]
    return b.tables[0].rows, "\n".join(said + (["; ".join(marks)] if marks else []))


def compare_rows(
    sa: RunSummary | None, sb: RunSummary | None, short: bool = False
) -> list[list[str]]:
    """metric, A, B, change, verdict from two typed summaries (one analysing row while either
    is still being analysed). ``short``: the metrics' short names (80 columns)."""
    return compare_table(sa, sb, short)[0]

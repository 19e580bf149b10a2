"""The compare screen's and ``--once --compare``'s table: the run diff of
:mod:`mlaprof.analysis.diff` (the one the report prints), as text rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlaprof.analysis.diff import SHORT_NAMES, diff, fmt_change, fmt_value

if TYPE_CHECKING:
    from mlaprof.analysis.diff import DiffRow, SummaryDiff
    from mlaprof.analysis.run_summary import RunSummary

HEAD = ["metric", "A", "B", "change", "B is"]
MARK = "*"  # after a short metric name: where its number comes from is in the legend


def _name(r: DiffRow, short: bool) -> str:
    if short:
        return f"{SHORT_NAMES.get(r.metric, r.metric)} ({r.unit})" + (MARK if r.provenance else "")
    return f"{r.metric} ({r.unit})" + (f" [{r.provenance}]" if r.provenance else "")


def compare_table(
    sa: RunSummary | None, sb: RunSummary | None, short: bool = False
) -> tuple[list[list[str]], str]:
    """(rows, legend): :func:`compare_rows`, and with ``short`` what its mark stands for (the
    one diff serves both)."""
    if sa is None or sb is None:
        return [["analysing...", "", "", "", ""]], ""
    d = diff(sa, sb)
    marked = sorted({r.provenance for r in d.table if r.provenance})
    legend = f"{MARK} {'; '.join(marked)}" if short and marked else ""
    return _rows(d, sa, sb, short), legend


def compare_rows(
    sa: RunSummary | None, sb: RunSummary | None, short: bool = False
) -> list[list[str]]:
    """metric, A, B, change, verdict from two typed summaries
    (one analysing row while either is still being analysed). ``short``: the metrics' short
    names, their provenance as a mark (80 columns; :func:`compare_table` gives the legend)."""
    return compare_table(sa, sb, short)[0]


def _rows(d: SummaryDiff, sa: RunSummary, sb: RunSummary, short: bool) -> list[list[str]]:
    rows = [
        [_name(r, short), fmt_value(r.a), fmt_value(r.b), fmt_change(r), str(r.verdict)]
        for r in d.table
    ]
    rows.append(["capture", _s(d.capture.before), _s(d.capture.after), "", ""])
    if d.route.before or d.route.after:
        route = [r or "not modelled" for r in (d.route.before, d.route.after)]
        rows.append(["vLLM route", *route, "", ""])
    for t in d.trace_splits:
        rows.append([f"S from the trace ({t.variant})", _s(t.S_before), _s(t.S_after), "", ""])
    rows.append(["backend", _s(d.backend.before), _s(d.backend.after), "", ""])
    policy = [s.scenario.policy or "-" for s in (sa, sb)]
    rows.append(["split policy", *policy, "", ""])
    return rows


def _s(v: Any) -> str:
    return "-" if v is None else str(v)

"""Plotly figures of a recorded run: one function per picture, the run summary's series (one
rank's) in, a ``plotly.graph_objects.Figure`` out. The notebooks, ``mlaprof report --html/--png`` and the
docs all draw these same pictures. Plotly is imported only when a figure is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlaprof.figures.breakdown import time_breakdown
from mlaprof.figures.diff import diff_table, run_diff
from mlaprof.figures.engine import shadow_splits
from mlaprof.figures.memory import capture_memory
from mlaprof.figures.padding import padding_waterfall
from mlaprof.figures.splits import occupancy, splits_used_vs_deserved
from mlaprof.figures.timeline import step_timeline
from mlaprof.figures.timing import full_vs_fallback, mode_medians
from mlaprof.figures.whatif import whatif_heatmap

# The report's figures, in reading order: (file stem, builder taking the summary's series).
RUN_FIGURES: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("timeline", step_timeline),
    ("layer_time", lambda run: time_breakdown(run, by="layer")),
    ("kernel_time", time_breakdown),
    ("splits_by_step", splits_used_vs_deserved),
    ("splits_by_policy", lambda run: splits_used_vs_deserved(run, by="policy")),
    ("splits_by_capture_size", lambda run: splits_used_vs_deserved(run, by="capture_size")),
    ("splits_by_layer", lambda run: splits_used_vs_deserved(run, by="layer")),
    ("occupancy", occupancy),
    ("shadow_splits", shadow_splits),
    ("padding", padding_waterfall),
    ("capture_memory", capture_memory),
    ("graph_mode_timing", full_vs_fallback),
    ("whatif", whatif_heatmap),
)

ENGINE_FIGURES = ("shadow_splits",)  # drawn for recorded vLLM engines only


def run_figures(
    summary: Any, only: Sequence[str] | None = None, diff: Any = None
) -> list[tuple[str, Any]]:
    """Every report figure of a run ``summary`` (drawn from its series, one rank each),
    preceded by the analysis' ``diff`` to a second run when given. Placeholders for what the
    run lacks are dropped; ``only`` builds just the named figures."""
    from mlaprof.analysis.run_summary import require_summary
    from mlaprof.figures._common import is_empty

    s = require_summary(summary, "the report's figures")
    want = set(only) if only is not None else None
    out = []
    if diff is not None and (want is None or "diff" in want):
        out.append(("diff", run_diff(diff)))
    for stem, build in RUN_FIGURES:
        if want is not None and stem not in want:
            continue
        fig = build(s if stem == "whatif" else s.series)
        if not is_empty(fig):
            out.append((stem, fig))
    return out


__all__ = [
    "ENGINE_FIGURES",
    "RUN_FIGURES",
    "capture_memory",
    "diff_table",
    "full_vs_fallback",
    "mode_medians",
    "occupancy",
    "padding_waterfall",
    "run_diff",
    "run_figures",
    "shadow_splits",
    "splits_used_vs_deserved",
    "step_timeline",
    "time_breakdown",
    "whatif_heatmap",
]

"""FULL graph replay vs fallback (PIECEWISE / eager): step time per graph mode, as the summary's
series holds it (the timing analyzer's medians of the served steps)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mlaprof.figures import _common as c
from mlaprof.rank_counts import counted

ORDER = ("FULL", "PIECEWISE", "NONE")


def mode_medians(data: Any, rank: int | None = None) -> pd.DataFrame:
    """Median / min / max step time (µs) and step count per graph mode, FULL first."""
    rs, _ = c.series_of(data, "steps", rank)
    return pd.DataFrame(
        [(m.mode, m.median_us, m.min_us, m.max_us, m.steps) for m in (rs.modes if rs else ())],
        columns=["graph_mode", "median_us", "min_us", "max_us", "steps"],
    )


def full_vs_fallback(data: Any, rank: int | None = None) -> Any:
    """Every served step's time as a point, one column per graph mode, with the median as a
    bar; the title gives each fallback's slowdown against FULL and the captures that failed."""
    go = c.go()
    rs, label = c.series_of(data, "steps", rank)
    title = "FULL graph replay vs fallback: step time"
    if rs is None or not rs.modes:
        return c.empty(title + label, "no timed steps in this run")
    modes = rs.modes
    unit, div = c.time_unit(max(m.max_us for m in modes) * 1e3)
    k = div / 1e3  # the series holds µs
    fig = c.figure()
    labels = {m.mode: c.MODE_LABELS.get(m.mode, m.mode) for m in modes}
    fig.add_trace(
        go.Bar(
            x=[labels[m.mode] for m in modes],
            y=[m.median_us / k for m in modes],
            name="median step time",
            marker={
                "color": [c.MODE_COLORS.get(m.mode, c.NEUTRAL) for m in modes],
                "opacity": 0.45,
            },  # fmt: skip
            width=0.5,
            text=[f"median {m.median_us / k:.1f} {unit}" for m in modes],
            textposition="inside",
            insidetextanchor="start",
            textfont={"color": "#222"},
            customdata=[m.steps for m in modes],
            hovertemplate=f"%{{x}}: median %{{y:.1f}} {unit} over %{{customdata}} steps<extra></extra>",
        )
    )
    for m in modes:
        fig.add_trace(
            go.Scatter(
                x=[labels[m.mode]] * len(m.points),
                y=[p.us / k for p in m.points],
                mode="markers",
                name=f"one step, {labels[m.mode]} (timed by {m.timing})",
                marker={"color": c.MODE_COLORS.get(m.mode, c.NEUTRAL), "size": 7},
                customdata=[(c.said(p.step), c.said(p.num_reqs)) for p in m.points],
                hovertemplate=(
                    f"step %{{customdata[0]}}: %{{y:.1f}} {unit}, %{{customdata[1]}} requests"
                    "<extra>%{fullData.name}</extra>"
                ),
            )
        )
    summary = []
    full = next((m for m in modes if m.mode == "FULL"), None)
    if full is not None and full.median_us > 0:
        summary += [
            f"{labels[m.mode]} is {m.median_us / full.median_us:.1f}x FULL"
            for m in modes
            if m.mode != "FULL"
        ]
    if not summary:
        summary.append(f"all {sum(m.steps for m in modes)} steps ran {', '.join(labels.values())}")
    if rs.failed_captures:
        r = rs.failed_captures[0]
        where = "an error" if r.op is None else f"{r.op} at {r.location}"
        fig.add_annotation(
            text=(
                f"{counted(len(rs.failed_captures), 'capture(s)')} {r.status}; first: size "
                f"{'?' if r.capture_size is None else r.capture_size}, layer "
                f"{'?' if r.layer is None else r.layer}: {where} → {r.fallback or 'a fallback'}"
            ),
            xref="paper", yref="paper", x=0, y=-0.3, showarrow=False, xanchor="left",
            font={"color": c.WORSE},
        )  # fmt: skip
    c.style(
        fig,
        f"{title} ({'; '.join(summary)}){label}",
        "graph mode the step ran in",
        f"step time ({unit})",
        height=460,
    )
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(margin={"b": 110})
    return fig

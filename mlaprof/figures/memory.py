"""Capture memory per capture size, in the three views that disagree in practice."""

from __future__ import annotations

from typing import Any

from mlaprof.figures import _common as c
from mlaprof.rank_counts import plural

VIEWS = (
    ("pool_bytes", "private graph memory pool", "#1f77b4"),
    ("allocator_bytes", "caching-allocator reserved delta", "#17becf"),
    ("driver_bytes", "driver free-memory delta (what vLLM logs)", "#9467bd"),
)


def _size(n: float) -> str:
    return f"{n / c.MIB / 1024:.2f} GiB" if n >= c.MIB * 1024 else f"{n / c.MIB:.1f} MiB"


def capture_memory(data: Any, rank: int | None = None) -> Any:
    """MiB each captured graph costs per capture size: pool, allocator and driver views; one panel
    per graph mode. Failed captures (from the captures table) are marked on the axis."""
    go = c.go()
    rs, label = c.series_of(data, "memory", rank)
    title = "Capture memory per capture size"
    if rs is None or not rs.memory:
        return c.empty(title + label, "no capture-memory records in this run")
    modes = list(dict.fromkeys(b.graph_mode for b in rs.memory))
    fig = c.subplots()(
        rows=len(modes),
        cols=1,
        subplot_titles=[f"{m} graphs" for m in modes] if len(modes) > 1 else None,
        vertical_spacing=0.18 if len(modes) > 1 else 0.1,
    )
    totals = []
    for row, mode in enumerate(modes, start=1):
        bars = [b for b in rs.memory if b.graph_mode == mode]
        x = [str(b.capture_size) for b in bars]
        had = []
        for col, view, color in VIEWS:
            vals = [getattr(b, col) for b in bars]
            if all(v is None for v in vals):
                continue
            had.append((col.split("_")[0], sum(v or 0 for v in vals)))
            mib = [None if v is None else v / c.MIB for v in vals]
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=mib,
                    name=view,
                    legendgroup=view,
                    showlegend=row == 1,
                    marker_color=color,
                    text=["" if v is None else f"{v:.1f}" for v in mib],
                    textposition="outside",
                    customdata=[_took(b.capture_ns) for b in bars],
                    hovertemplate=(
                        "capture size %{x}: %{y:.2f} MiB<br>capture took %{customdata}"
                        f"<extra>{view}</extra>"
                    ),
                ),
                row=row,
                col=1,
            )
        if had:
            name, val = had[-1]
            totals.append(f"{mode}: {_size(val)} total ({name} view)")
        fig.update_xaxes(title_text="capture size (padded tokens)", type="category", row=row, col=1)
        top = max([0.0, *(getattr(b, v[0]) or 0.0 for b in bars for v in VIEWS)])
        fig.update_yaxes(
            title_text="memory (MiB)", range=[0, max(1.0, top / c.MIB * 1.2)], row=row, col=1
        )
    if rs.failed_captures:
        failed = [
            str(s)
            for s in dict.fromkeys(f.capture_size for f in rs.failed_captures)
            if s is not None
        ]
        fig.add_annotation(
            text=f"capture failed (or is predicted to) for {plural('size(s)', len(failed))} "
            f"{', '.join(failed)}: no memory for them",
            xref="paper",
            yref="paper",
            x=0,
            y=-0.32 / len(modes),
            showarrow=False,
            font={"color": c.WORSE},
            xanchor="left",
        )
    c.style(
        fig,
        f"{title}: {'; '.join(totals)}{label}",
        "capture size (padded tokens)",
        "memory (MiB)",
        height=240 + 260 * len(modes),
    )
    fig.update_layout(barmode="group", margin={"b": 110})
    if len(modes) > 1:  # the legend on top would sit on the first panel's title
        fig.update_layout(legend={"y": -0.12, "yanchor": "top"})
    return fig


def _took(ns: float | None) -> str:
    """A capture's time for its hover ("12.3 ms"; "unknown" where none was recorded)."""
    v = c.said(ns)
    return v if isinstance(v, str) else f"{v / 1e6:.1f} ms"

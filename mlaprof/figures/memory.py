"""Capture memory per capture size, in the three views that disagree in practice."""

from __future__ import annotations

from typing import Any

from mlaprof.figures import _common as c

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
    mem = c.numeric(
        c.table(data, "memory", rank), "capture_size", "capture_ns", *(v[0] for v in VIEWS)
    )
    mem = mem.dropna(subset=["capture_size"])
    title = "Capture memory per capture size"
    if mem.empty:
        return c.empty(title + c.run_label(data, rank), "no capture-memory records in this run")
    mem["graph_mode"] = mem["graph_mode"].fillna("?").astype(str)
    modes = list(dict.fromkeys(mem["graph_mode"]))
    fig = c.subplots()(
        rows=len(modes),
        cols=1,
        subplot_titles=[f"{m} graphs" for m in modes] if len(modes) > 1 else None,
        vertical_spacing=0.18 if len(modes) > 1 else 0.1,
    )
    totals = []
    for row, mode in enumerate(modes, start=1):
        g = mem[mem["graph_mode"] == mode].groupby("capture_size").sum(numeric_only=True)
        g = g.sort_index()
        x = [str(int(s)) for s in g.index]
        for col, label, color in VIEWS:
            if g[col].isna().all() or mem.loc[mem["graph_mode"] == mode, col].isna().all():
                continue
            mib = (g[col] / c.MIB).tolist()
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=mib,
                    name=label,
                    legendgroup=label,
                    showlegend=row == 1,
                    marker_color=color,
                    text=[f"{v:.1f}" for v in mib],
                    textposition="outside",
                    customdata=(g["capture_ns"] / 1e6).tolist(),
                    hovertemplate=(
                        "capture size %{x}: %{y:.2f} MiB<br>capture took %{customdata:.1f} ms"
                        f"<extra>{label}</extra>"
                    ),
                ),
                row=row,
                col=1,
            )
        views = [(col.split("_")[0], g[col].sum()) for col, _, _ in VIEWS if g[col].notna().any()]
        if views:
            name, val = views[-1]
            totals.append(f"{mode}: {_size(val)} total ({name} view)")
        fig.update_xaxes(title_text="capture size (padded tokens)", type="category", row=row, col=1)
        top = max([0.0, *(float(g[v[0]].max()) for v in VIEWS if g[v[0]].notna().any())])
        fig.update_yaxes(
            title_text="memory (MiB)", range=[0, max(1.0, top / c.MIB * 1.2)], row=row, col=1
        )
    failed = c.table(data, "captures", rank)
    failed = failed[failed["status"].isin(c.FAILED_CAPTURE)] if not failed.empty else failed
    if not failed.empty:
        sizes = ", ".join(str(s) for s in failed["capture_size"].dropna().astype(int).unique())
        fig.add_annotation(
            text=f"capture failed (or is predicted to) for size(s) {sizes}: no memory for them",
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
        f"{title}: {'; '.join(totals)}{c.run_label(data, rank)}",
        "capture size (padded tokens)",
        "memory (MiB)",
        height=240 + 260 * len(modes),
    )
    fig.update_layout(barmode="group", margin={"b": 110})
    if len(modes) > 1:  # the legend on top would sit on the first panel's title
        fig.update_layout(legend={"y": -0.12, "yanchor": "top"})
    return fig

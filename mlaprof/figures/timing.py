"""FULL graph replay vs fallback (PIECEWISE / eager): step time per graph mode."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mlaprof.figures import _common as c

ORDER = ("FULL", "PIECEWISE", "NONE")


def mode_medians(data: Any, rank: int | None = None) -> pd.DataFrame:
    """Median / min / max step time (µs) and step count per graph mode, FULL first."""
    st = c.numeric(c.table(data, "steps", rank), "duration_ns").dropna(subset=["duration_ns"])
    if st.empty:
        return pd.DataFrame(columns=["graph_mode", "median_us", "min_us", "max_us", "steps"])
    st["graph_mode"] = st["graph_mode"].fillna("?").astype(str)
    g = st.groupby("graph_mode")["duration_ns"].agg(["median", "min", "max", "count"]) / [
        1e3,
        1e3,
        1e3,
        1,
    ]
    g.columns = ["median_us", "min_us", "max_us", "steps"]
    rank_of = {m: i for i, m in enumerate(ORDER)}
    g = g.reset_index().sort_values("graph_mode", key=lambda s: s.map(lambda m: rank_of.get(m, 9)))
    g["steps"] = g["steps"].astype(int)
    return g.reset_index(drop=True)


def full_vs_fallback(data: Any, rank: int | None = None) -> Any:
    """Every step's time as a point, one column per graph mode, with the median as a bar; the
    title gives each fallback's slowdown against FULL and the captures that failed."""
    go = c.go()
    st = c.numeric(c.table(data, "steps", rank), "step", "duration_ns", "num_reqs")
    st = st.dropna(subset=["duration_ns"])
    title = "FULL graph replay vs fallback: step time"
    if st.empty:
        return c.empty(title + c.run_label(data, rank), "no timed steps in this run")
    st["graph_mode"] = st["graph_mode"].fillna("?").astype(str)
    med = mode_medians(data, rank)
    unit, div = c.time_unit(float(st["duration_ns"].max()))
    k = div / 1e3  # mode_medians gives µs
    fig = go.Figure()
    labels = {m: c.MODE_LABELS.get(m, m) for m in med["graph_mode"]}
    fig.add_trace(
        go.Bar(
            x=[labels[m] for m in med["graph_mode"]],
            y=(med["median_us"] / k).tolist(),
            name="median step time",
            marker={
                "color": [c.MODE_COLORS.get(m, c.NEUTRAL) for m in med["graph_mode"]],
                "opacity": 0.45,
            },
            width=0.5,
            text=[f"median {v / k:.1f} {unit}" for v in med["median_us"]],
            textposition="inside",
            insidetextanchor="start",
            textfont={"color": "#222"},
            customdata=med["steps"].tolist(),
            hovertemplate=f"%{{x}}: median %{{y:.1f}} {unit} over %{{customdata}} steps<extra></extra>",
        )
    )
    for mode in med["graph_mode"]:
        grp = st[st["graph_mode"] == mode]
        timing = grp["timing"].fillna("unknown").astype(str)
        fig.add_trace(
            go.Scatter(
                x=[labels[mode]] * len(grp),
                y=(grp["duration_ns"] / div).tolist(),
                mode="markers",
                name=f"one step, {labels[mode]} (timed by {timing.iloc[0]})",
                marker={"color": c.MODE_COLORS.get(mode, c.NEUTRAL), "size": 7},
                customdata=list(
                    zip(grp["step"].fillna(-1).astype(int), grp["num_reqs"], strict=True)
                ),
                hovertemplate=(
                    f"step %{{customdata[0]}}: %{{y:.1f}} {unit}, %{{customdata[1]}} requests"
                    "<extra>%{fullData.name}</extra>"
                ),
            )
        )
    summary = []
    if "FULL" in set(med["graph_mode"]):
        full = float(med.loc[med["graph_mode"] == "FULL", "median_us"].iloc[0])
        for _, r in med[med["graph_mode"] != "FULL"].iterrows():
            if full > 0:
                summary.append(f"{labels[r['graph_mode']]} is {r['median_us'] / full:.1f}x FULL")
    if not summary:
        summary.append(f"all {len(st)} steps ran {', '.join(labels.values())}")
    cap = c.table(data, "captures", rank)
    failed = cap[cap["status"].isin(c.FAILED_CAPTURE)] if not cap.empty else cap
    if not failed.empty:
        r = failed.iloc[0]
        size = "?" if pd.isna(r["capture_size"]) else int(float(r["capture_size"]))
        layer = "?" if pd.isna(r["layer"]) else int(float(r["layer"]))
        where = "an error" if pd.isna(r["op"]) else f"{r['op']} at {r['location']}"
        fb = "a fallback" if pd.isna(r["fallback"]) else r["fallback"]
        fig.add_annotation(
            text=(
                f"{len(failed)} capture(s) {r['status']}; first: size {size}, "
                f"layer {layer}: {where} → {fb}"
            ),
            xref="paper",
            yref="paper",
            x=0,
            y=-0.3,
            showarrow=False,
            xanchor="left",
            font={"color": c.WORSE},
        )
    c.style(
        fig,
        f"{title} ({'; '.join(summary)}){c.run_label(data, rank)}",
        "graph mode the step ran in",
        f"step time ({unit})",
        height=460,
    )
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(margin={"b": 110})
    return fig

"""Step timeline: a step lane, a layer lane and one kernel lane per stream, in microseconds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from mlaprof.figures import _common as c
from mlaprof.store.schema import columns
from mlaprof.textsafe import plain

STEP_LANE = "steps"
LAYER_LANE = "layers"
TOP_KERNELS = 8  # kernel names with their own legend entry; the rest are "other kernels"
KERNEL_COLORS = (
    "#17becf", "#bcbd22", "#e377c2", "#8c564b", "#9467bd", "#2ca02c", "#ff7f0e", "#1f77b4",
)  # fmt: skip


def _pick_steps(steps: pd.DataFrame, want: Sequence[int] | None, default: int) -> list[int]:
    have = sorted(int(s) for s in steps["step"].dropna().unique())
    if want is None:
        return have[:default]
    return [s for s in want if s in set(have)]


def step_timeline(
    data: Any,
    steps: Sequence[int] | None = None,
    rank: int | None = None,
    max_kernels: int = 3000,
    default_steps: int = 3,
) -> Any:
    """Steps, layers and kernels on one microsecond axis (time since the first bar shown).

    ``steps`` picks engine steps (default: the first ``default_steps``). Kernels are those of the
    chosen steps, or those inside their time window; without steps (an imported trace) the first
    ``max_kernels`` kernels are drawn.
    """
    go = c.go()
    st = c.numeric(c.table(data, "steps", rank), "step", "t_start_ns", "duration_ns")
    ly = c.numeric(c.table(data, "layers", rank), "step", "layer", "t_start_ns", "duration_ns")
    ly = c.numeric(ly, "syncs", "splits_used", "splits_deserved")
    pick = c.kernel_rank(data, rank)  # a Run: only the kernels shown are read (SQL)
    timed = "rank = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL"
    if pick is None:
        kn = c.numeric(c.table(data, "kernels", rank), "step", "layer", "start_ns", "end_ns",
                       "stream").dropna(subset=["start_ns", "end_ns"])  # fmt: skip
        any_kernels = not kn.empty
    else:
        got = data.sql(f"SELECT COUNT(*) AS n FROM kernels WHERE {timed}", (pick,))
        any_kernels = bool(len(got) and got["n"].iloc[0])
    st = st.dropna(subset=["t_start_ns", "duration_ns"])
    ly = ly.dropna(subset=["t_start_ns", "duration_ns"])
    title = "Step timeline" if not (st.empty and ly.empty) else "Kernel timeline"
    if st.empty and ly.empty and not any_kernels:
        return c.empty(
            title + c.run_label(data, rank), "no timed steps, layers or kernels recorded"
        )

    chosen = _pick_steps(st, steps, default_steps) if not st.empty else []
    note = ""
    where, params = timed, [pick]
    if chosen:
        st = st[st["step"].isin(chosen)]
        ly = ly[ly["step"].isin(chosen)]
        lo = st["t_start_ns"].min()
        hi = (st["t_start_ns"] + st["duration_ns"]).max()
        if pick is None:
            in_window = (kn["start_ns"] < hi) & (kn["end_ns"] > lo)
            kn = kn[kn["step"].isin(chosen) | (kn["step"].isna() & in_window)]
        else:
            where += (f" AND (step IN ({', '.join('?' * len(chosen))}) OR (step IS NULL AND "
                      "start_ns < ? AND end_ns > ?))")  # fmt: skip
            params += [int(x) for x in chosen] + [int(hi), int(lo)]
        total = int(c.table(data, "steps", rank)["step"].nunique())
        span = f"{chosen[0]}" if len(chosen) == 1 else f"{chosen[0]}–{chosen[-1]}"
        title += f": step{'s' if len(chosen) > 1 else ''} {span} of {total}"
    if pick is None:
        kn = kn.sort_values("start_ns")
        shown = len(kn)
    else:
        cols = ", ".join(columns("kernels"))
        shown = int(data.sql(f"SELECT COUNT(*) AS n FROM kernels WHERE {where}",
                             tuple(params))["n"].iloc[0])  # fmt: skip
        kn = data.sql(f"SELECT {cols} FROM kernels WHERE {where} ORDER BY start_ns "
                      f"LIMIT {int(max_kernels)}", tuple(params))  # fmt: skip
        kn = c.numeric(kn, "step", "layer", "start_ns", "end_ns", "stream")
    if shown > max_kernels:
        note = f" (first {max_kernels} of {shown} kernels)"
        kn = kn.head(max_kernels)

    starts = [
        s for s in (st["t_start_ns"].min(), ly["t_start_ns"].min(), kn["start_ns"].min()) if s == s
    ]
    t0 = min(starts)

    def us(ns: pd.Series) -> list[float]:
        return ((ns - t0) / 1e3).round(3).tolist()

    fig = go.Figure()
    lanes: list[str] = []

    if not st.empty:
        lanes.append(STEP_LANE)
        for mode, grp in st.groupby(st["graph_mode"].fillna("?"), sort=False):
            timing = grp["timing"].fillna("").astype(str)
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    y=[STEP_LANE] * len(grp),
                    base=us(grp["t_start_ns"]),
                    x=(grp["duration_ns"] / 1e3).tolist(),
                    name=f"step, {c.MODE_LABELS.get(mode, mode)}",
                    marker_color=c.MODE_COLORS.get(mode, c.NEUTRAL),
                    text=[f"step {int(s)}" for s in grp["step"]],
                    textposition="inside",
                    insidetextanchor="middle",
                    customdata=list(
                        zip(grp["step"].astype(int), timing, grp["num_reqs"], strict=True)
                    ),
                    hovertemplate=(
                        "step %{customdata[0]}<br>start %{base:.1f} µs, %{x:.1f} µs"
                        "<br>requests (padded): %{customdata[2]}<br>timing: %{customdata[1]}"
                        "<extra>%{fullData.name}</extra>"
                    ),
                )
            )

    if not ly.empty:
        lanes.append(LAYER_LANE)
        kind = ly["syncs"].map(lambda v: "unwatched" if v != v else ("sync" if v > 0 else "clean"))
        for flag, label, color in (
            ("clean", "layer (no host sync)", c.REAL),
            ("sync", "layer with host syncs (cannot be graph-captured)", c.USED),
            ("unwatched", "layer (not watched for syncs)", "#aec7e8"),
        ):
            grp = ly[kind == flag]
            if grp.empty:
                continue
            fig.add_trace(
                go.Bar(
                    orientation="h",
                    y=[LAYER_LANE] * len(grp),
                    base=us(grp["t_start_ns"]),
                    x=(grp["duration_ns"] / 1e3).tolist(),
                    name=label,
                    marker_color=color,
                    marker_line={"color": "white", "width": 1},
                    text=[f"L{int(v)}" for v in grp["layer"]],
                    textposition="inside",
                    insidetextanchor="middle",
                    customdata=list(
                        zip(
                            grp["step"].astype(int),
                            grp["layer"].astype(int),
                            grp["syncs"].map(lambda v: "not watched" if v != v else int(v)),
                            grp["splits_used"].fillna(-1).astype(int),
                            grp["splits_deserved"].fillna(-1).astype(int),
                            strict=True,
                        )
                    ),
                    hovertemplate=(
                        "step %{customdata[0]}, layer %{customdata[1]}"
                        "<br>start %{base:.1f} µs, %{x:.1f} µs<br>host syncs: %{customdata[2]}"
                        "<br>KV splits used %{customdata[3]}, deserved %{customdata[4]}"
                        "<extra>%{fullData.name}</extra>"
                    ),
                )
            )

    if not kn.empty:
        kn = kn.assign(
            lane=[
                "kernels" if s != s else f"kernels, stream {int(s)}" for s in kn["stream"].tolist()
            ],
            dur=kn["end_ns"] - kn["start_ns"],
        )
        lanes.extend(sorted(kn["lane"].unique()))
        top = kn.groupby("name")["dur"].sum().sort_values(ascending=False).index[:TOP_KERNELS]
        kn["label"] = [c.kernel_label(n) if n in set(top) else "other kernels" for n in kn["name"]]
        order = list(dict.fromkeys(c.kernel_label(n) for n in top)) + ["other kernels"]
        for i, label in enumerate(order):
            grp = kn[kn["label"] == label]
            if grp.empty:
                continue
            color = c.NEUTRAL if label == "other kernels" else KERNEL_COLORS[i % len(KERNEL_COLORS)]
            fig.add_trace(
                go.Bar(
                    marker_color=color,
                    legendgroup=label,
                    orientation="h",
                    y=grp["lane"].tolist(),
                    base=us(grp["start_ns"]),
                    x=(grp["dur"] / 1e3).tolist(),
                    name=f"kernel {label}" if label != "other kernels" else label,
                    customdata=list(
                        zip(
                            # a 10 MB name is shown shortened with its length, as everywhere
                            grp["name"].map({n: plain(n) for n in set(grp["name"])}),
                            grp["splits"].fillna(-1),
                            grp["layer"].fillna(-1),
                            strict=True,
                        )
                    ),
                    hovertemplate=(
                        "%{customdata[0]}<br>start %{base:.2f} µs, %{x:.2f} µs"
                        "<br>layer %{customdata[2]}, KV splits %{customdata[1]}"
                        "<extra></extra>"
                    ),
                )
            )
            # a tick at each kernel start: microsecond kernels in a long window stay visible
            fig.add_trace(
                go.Scatter(
                    x=us(grp["start_ns"]),
                    y=grp["lane"].tolist(),
                    mode="markers",
                    marker={"symbol": "line-ns", "size": 18, "line": {"width": 1, "color": color}},
                    legendgroup=label,
                    showlegend=False,
                    hoverinfo="skip",
                    name=f"start of {label}",
                )
            )

    n_legend = sum(1 for t in fig.data if t.showlegend is not False)
    legend_rows = -(-n_legend // 3)
    c.style(
        fig,
        title + note + c.run_label(data, rank),
        "time since the first bar shown (µs)",
        "",
        height=260 + 45 * len(lanes) + (22 * legend_rows if legend_rows > 1 else 0),
    )
    if legend_rows > 1:  # many entries: the legend goes under the plot, not over the title
        fig.update_layout(
            legend={"yref": "container", "y": 0, "yanchor": "bottom"},
            margin={"b": 70 + 22 * legend_rows},
        )
    fig.update_layout(barmode="overlay", bargap=0.3, uniformtext={"minsize": 8, "mode": "hide"})
    fig.update_xaxes(type="linear", rangemode="tozero", tickformat=",.0f")
    fig.update_yaxes(categoryorder="array", categoryarray=lanes, autorange="reversed")
    return fig

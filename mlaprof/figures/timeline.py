"""Step timeline: a step lane, a layer lane and one kernel lane per stream, in microseconds, as
the summary's series holds it (:func:`mlaprof.analysis.series.timeline`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mlaprof.analysis.series import TIMELINE_KERNELS, TIMELINE_STEPS
from mlaprof.analysis.step_syncs import NOT_CHECKED
from mlaprof.figures import _common as c
from mlaprof.textsafe import plain

STEP_LANE = "steps"
LAYER_LANE = "layers"
KERNEL_COLORS = (
    "#17becf", "#bcbd22", "#e377c2", "#8c564b", "#9467bd", "#2ca02c", "#ff7f0e", "#1f77b4",
)  # fmt: skip
LAYER_KINDS = (
    ("clean", "layer (no host sync)", c.REAL),
    ("sync", "layer with host syncs (cannot be graph-captured)", c.USED),
    ("unwatched", f"layer (syncs {NOT_CHECKED})", "#aec7e8"),
)


def _lane(go: Any, bars: list[Any], **kw: Any) -> Any:
    """The bars of one lane (steps or layers), labelled inside."""
    return go.Bar(orientation="h", y=[b.lane for b in bars], base=[b.start_us for b in bars],
                  x=[b.dur_us for b in bars], text=[b.label for b in bars],
                  textposition="inside", insidetextanchor="middle", **kw)  # fmt: skip


def _other_view(
    data: Any, rank: int | None, steps: Any, max_kernels: int, first: int
) -> tuple[Any, str]:
    """Another window than the summary's (other steps or kernel cap), as the series module
    builds it: a Run's over the steps its report counts (the same evidence; an imported
    trace's drafter passes left out), a mapping's over the frames handed over."""
    from mlaprof.analysis.series import Window, timeline

    want = None if steps is None else tuple(int(x) for x in steps)
    if c.is_run(data):
        rs, label = c.series_of(data, "steps", rank, Window(want, max_kernels, first, rank))
        return (rs.timeline if rs is not None else None), label
    rs, label = c.series_of(data, "steps", rank)
    r = rs.rank if rs is not None else (rank or 0)
    st, ly = c.table(data, "steps", r), c.table(data, "layers", r)
    return timeline(data, r, st, ly, None if want is None else list(want), max_kernels,
                    first=first), label  # fmt: skip


def step_timeline(
    data: Any,
    steps: Sequence[int] | None = None,
    rank: int | None = None,
    max_kernels: int = TIMELINE_KERNELS,
    default_steps: int = TIMELINE_STEPS,
) -> Any:
    """Steps, layers and kernels on one microsecond axis (time since the first bar shown).

    The summary holds the first steps (default); ``steps`` / ``max_kernels`` on a Run or its
    frames pick another window, a step not among them an error in both (one rule:
    :func:`mlaprof.analysis.series.window_steps`). Kernels are those of the chosen steps, or
    those inside their time window; without steps (an imported trace) the first
    ``max_kernels`` kernels are drawn."""
    go = c.go()
    other = steps is not None or max_kernels != TIMELINE_KERNELS or default_steps != TIMELINE_STEPS
    if other and (c.is_run(data) or isinstance(data, Mapping)):  # a Run or its frames
        tl, label = _other_view(data, rank, steps, max_kernels, default_steps)
    else:
        rs, label = c.series_of(data, "steps", rank)
        tl = rs.timeline if rs is not None else None
    if tl is None or not tl.bars:
        return c.empty("Step timeline" + label, "no timed steps, layers or kernels recorded")
    has_steps = any(b.lane in (STEP_LANE, LAYER_LANE) for b in tl.bars)
    title = "Step timeline" if has_steps else "Kernel timeline"
    if tl.steps_shown:
        title += f": {tl.steps_text}"
    note = (
        f" (first {tl.kernels_shown} of {tl.kernels_in_window} kernels)"
        if tl.kernels_in_window > tl.kernels_shown
        else ""
    )
    fig = c.figure()
    groups: dict[str, list[Any]] = {}
    for b in tl.bars:
        groups.setdefault(b.series, []).append(b)
    for key, bars in groups.items():
        if not key.startswith("step:"):
            continue
        mode = key.removeprefix("step:")
        fig.add_trace(
            _lane(
                go,
                bars,
                name=f"step, {c.MODE_LABELS.get(mode, mode)}",
                marker_color=c.MODE_COLORS.get(mode, c.NEUTRAL),
                customdata=[tuple(c.said(x) for x in b.detail) for b in bars],
                hovertemplate=(
                    "step %{customdata[0]}<br>start %{base:.1f} µs, %{x:.1f} µs"
                    "<br>requests (padded): %{customdata[2]}<br>timing: %{customdata[1]}"
                    "<extra>%{fullData.name}</extra>"
                ),
            )
        )
    for flag, name, color in LAYER_KINDS:
        bars = groups.get(f"layer:{flag}", [])
        if not bars:
            continue
        fig.add_trace(
            _lane(
                go,
                bars,
                name=name,
                marker_color=color,
                marker_line={"color": "white", "width": 1},
                customdata=[
                    (
                        d[0],
                        d[1],
                        NOT_CHECKED if d[2] is None else d[2],
                        c.said(d[3]),
                        c.said(d[4]),
                    )
                    for d in (b.detail for b in bars)
                ],  # fmt: skip
                hovertemplate=(
                    "step %{customdata[0]}, layer %{customdata[1]}"
                    "<br>start %{base:.1f} µs, %{x:.1f} µs<br>host syncs: %{customdata[2]}"
                    "<br>KV splits used %{customdata[3]}, deserved %{customdata[4]}"
                    "<extra>%{fullData.name}</extra>"
                ),
            )
        )
    kernel_keys = [k for k in groups if k.startswith("kernel:")]
    kernel_keys.sort(key=lambda k: k == "kernel:other kernels")  # named kernels first
    for i, key in enumerate(kernel_keys):
        bars, name = groups[key], key.removeprefix("kernel:")
        color = c.NEUTRAL if name == "other kernels" else KERNEL_COLORS[i % len(KERNEL_COLORS)]
        fig.add_trace(
            go.Bar(
                marker_color=color,
                legendgroup=name,
                orientation="h",
                y=[b.lane for b in bars],
                base=[b.start_us for b in bars],
                x=[b.dur_us for b in bars],
                name=f"kernel {name}" if name != "other kernels" else name,
                # a 10 MB name is shown shortened with its length, as everywhere
                customdata=[
                    (
                        plain(b.label),
                        c.said(b.detail[0]),
                        c.said(b.detail[1]),
                    )
                    for b in bars
                ],  # fmt: skip
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
                x=[b.start_us for b in bars],
                y=[b.lane for b in bars],
                mode="markers",
                marker={"symbol": "line-ns", "size": 18, "line": {"width": 1, "color": color}},
                legendgroup=name,
                showlegend=False,
                hoverinfo="skip",
                name=f"start of {name}",
            )
        )
    n_legend = sum(1 for t in fig.data if t.showlegend is not False)
    legend_rows = -(-n_legend // 3)
    c.style(
        fig,
        title + note + label,
        "time since the first bar shown (µs)",
        "",
        height=260 + 45 * len(tl.lanes) + (22 * legend_rows if legend_rows > 1 else 0),
    )
    if legend_rows > 1:  # many entries: the legend goes under the plot, not over the title
        fig.update_layout(
            legend={"yref": "container", "y": 0, "yanchor": "bottom"},
            margin={"b": 70 + 22 * legend_rows},
        )
    fig.update_layout(barmode="overlay", bargap=0.3, uniformtext={"minsize": 8, "mode": "hide"})
    fig.update_xaxes(type="linear", rangemode="tozero", tickformat=",.0f")
    fig.update_yaxes(categoryorder="array", categoryarray=list(tl.lanes), autorange="reversed")
    return fig

"""Padding waterfall: real rows + padding rows = what a FULL graph runs, and the work wasted."""

from __future__ import annotations

from typing import Any

from mlaprof.analysis.padding import padding_waste
from mlaprof.analysis.share import share_text
from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c

PANELS = (
    ("requests", "real_rows", "padding_rows", 1.0, "{:.0f}", "rows (count)"),
    ("query tokens", "real_tokens", "padding_tokens", 1.0, "{:.0f}", "tokens (count)"),
    ("KV read per layer", "kv_bytes_real", "kv_bytes_padding", c.MIB, "{:.2f}", "KV bytes (MiB)"),
)


def padding_waterfall(data: Any, step: int | None = None, rank: int | None = None) -> Any:
    """Real work, padding added on top, and the total the captured graph runs: rows, query tokens
    and KV bytes per layer. ``step=None`` draws the run's totals (the summary's padding section
    for this rank); a step draws that step's record."""
    go = c.go()
    rs, rlabel = c.series_of(data, "padding", rank)
    title = "Padding waterfall"
    if rs is None or not rs.padding_steps:
        return c.empty(title + rlabel, "no padding records in this run")
    if step is not None:
        one = [p for p in rs.padding_steps if p.step == step]
        if not one:
            raise MlaprofError(f"no padding record for step {step}")
        vals = one[0]
        scope = f"step {step} (capture size {vals.capture_size} tokens)"
        kv_real = vals.kv_bytes_real
    else:
        vals = rs.padding
        scope = f"summed over {vals.steps} steps"
        kv_real = rs.kv_bytes_real
    fig = c.subplots()(
        rows=1, cols=len(PANELS), subplot_titles=[p[0] for p in PANELS], horizontal_spacing=0.08
    )
    wasted: dict[str, float] = {}  # shares 0..1, worded by share_text (never a 0% of a waste)
    for i, (label, real_col, pad_col, scale, fmt, _) in enumerate(PANELS, start=1):
        if not _recorded([vals] if step is not None else rs.padding_steps, real_col, pad_col):
            continue
        # the run's KV bytes of real rows: the series' sum over the steps that recorded them
        raw_real = kv_real if real_col == "kv_bytes_real" else getattr(vals, real_col)
        raw_pad = getattr(vals, pad_col)
        if raw_real is None or raw_pad is None:  # never drawn as a 0 of real work or padding
            gone = "real work" if raw_real is None else "padding"
            fig.add_annotation(text=f"{gone} not recorded: not drawn", x=0.5, y=0.5,
                               xref=f"x{i if i > 1 else ''} domain",
                               yref=f"y{i if i > 1 else ''} domain", showarrow=False)  # fmt: skip
            continue
        real = float(raw_real) / scale
        pad = float(raw_pad) / scale
        total = real + pad
        waste = padding_waste(real, pad) or 0.0  # the analysis' padding share
        wasted[label] = waste
        fig.add_trace(
            go.Waterfall(
                x=["real", "padding", "total run"],
                y=[real, pad, 0.0],
                measure=["absolute", "relative", "total"],
                text=[
                    fmt.format(real),
                    f"+{fmt.format(pad)} ({share_text(waste, 1)} wasted)",
                    fmt.format(total),
                ],
                textposition="outside",
                totals={"marker": {"color": c.REAL}},
                increasing={"marker": {"color": c.PADDING}},
                connector={"line": {"color": c.NEUTRAL, "dash": "dot"}},
                name=label,
                showlegend=False,
                hovertemplate=f"{label}: %{{x}} %{{y}}<extra></extra>",
            ),
            row=1,
            col=i,
        )
        fig.update_yaxes(range=[0, total * 1.25 if total else 1], row=1, col=i)
    # legend entries for the colours (waterfalls colour by measure, not by trace)
    for name, color in (
        ("real work (real requests)", c.REAL),
        ("padding added by FULL-graph padding (wasted work)", c.PADDING),
    ):
        fig.add_trace(
            go.Bar(x=[None], y=[None], name=name, marker_color=color, showlegend=True), row=1, col=1
        )
    share = ", ".join(f"{share_text(v, 1)} of {k}" for k, v in wasted.items())
    c.style(
        fig,
        f"{title}, {scope}: padding is {share}{rlabel}",
        "",
        "",
        height=460,
    )
    for i, p in enumerate(PANELS, start=1):
        fig.update_yaxes(title_text=p[5], row=1, col=i)
        fig.update_xaxes(title_text="work the captured graph runs", row=1, col=i)
    fig.update_layout(legend={"y": -0.12, "yanchor": "top"}, margin={"b": 80})
    return fig


def _recorded(steps: Any, *cols: str) -> bool:
    return any(getattr(p, col) is not None for p in steps for col in cols)

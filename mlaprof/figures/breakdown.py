"""Where the time goes: per layer (median over served steps) and per kernel (summed GPU time),
as the summary's series holds them."""

from __future__ import annotations

from typing import Any

from mlaprof.analysis.series import KERNEL_TOP, top_kernels
from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c


def time_breakdown(
    data: Any, by: str = "kernel", top: int = KERNEL_TOP, rank: int | None = None
) -> Any:
    """``by="kernel"``: GPU time summed per kernel name (the ``top`` largest, the rest as
    "other kernels"); ``by="layer"``: each layer's median time over steps, with min-max bars."""
    if by not in ("kernel", "layer"):
        raise MlaprofError(f"by must be 'kernel' or 'layer', got {by!r}")
    go = c.go()
    fig = c.figure()
    rs, label = c.series_of(data, "layers" if by == "layer" else "kernels", rank)
    if by == "layer":
        title = "Time per layer"
        if rs is None or not rs.layer_time:
            return c.empty(title + label, "no timed layers in this run")
        g = rs.layer_time
        unit, div = c.time_unit(max(x.max_us for x in g) * 1e3)
        k = div / 1e3
        fig.add_trace(
            go.Bar(
                x=[x.layer for x in g],
                y=[x.median_us / k for x in g],
                name=f"median over steps ({unit})",
                marker_color=c.REAL,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [(x.max_us - x.median_us) / k for x in g],
                    "arrayminus": [(x.median_us - x.min_us) / k for x in g],
                    "color": c.NEUTRAL,
                },
                customdata=[x.steps for x in g],
                hovertemplate=(
                    f"layer %{{x}}: median %{{y:.1f}} {unit} over %{{customdata}} steps"
                    "<extra></extra>"
                ),
            )
        )
        c.style(
            fig,
            f"{title}: median over {rs.layer_time_steps} steps, bars span min to max{label}",
            "attention layer",
            f"layer time ({unit})",
        )
        fig.update_xaxes(dtick=1 if len(g) <= 30 else None)
        fig.update_layout(showlegend=True)
        return fig

    title = "GPU time per kernel"
    if rs is None or not rs.kernels:
        return c.empty(title + label, "no kernel records in this run")
    launches = sum(x.launches for x in rs.kernels)
    total = sum(x.total_us for x in rs.kernels)
    rows = top_kernels(rs.kernels, top)[::-1]  # largest on top
    fig.add_trace(
        go.Bar(
            orientation="h",
            y=[x.label for x in rows],
            x=[x.total_us for x in rows],
            name="GPU time summed over launches (µs)",
            marker_color=c.REAL,
            text=[
                f"{x.total_us:,.0f} µs ({100 * x.total_us / (total or 1):.0f}%), {x.launches}x"
                for x in rows
            ],  # fmt: skip
            textposition="auto",
            hovertemplate="%{y}: %{x:,.1f} µs<extra></extra>",
        )
    )
    c.style(
        fig,
        f"{title}: {launches} launches of {len(rs.kernels)} kernel names, {total:,.0f} µs in all"
        f"{label}",
        "GPU time (µs, summed over launches)",
        "",
        height=160 + 30 * len(rows),
    )
    fig.update_layout(margin={"l": 330}, showlegend=True)
    fig.update_yaxes(automargin=True)
    return fig

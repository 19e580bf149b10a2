"""Where the time goes: per layer (median over steps) and per kernel (summed GPU time)."""

from __future__ import annotations

from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c


def time_breakdown(data: Any, by: str = "kernel", top: int = 12, rank: int | None = None) -> Any:
    """``by="kernel"``: GPU time summed per kernel name (the ``top`` largest, the rest as
    "other kernels"); ``by="layer"``: each layer's median time over steps, with min-max bars."""
    if by not in ("kernel", "layer"):
        raise MlaprofError(f"by must be 'kernel' or 'layer', got {by!r}")
    go = c.go()
    fig = go.Figure()
    if by == "layer":
        ly = c.numeric(c.table(data, "layers", rank), "step", "layer", "duration_ns")
        ly = ly.dropna(subset=["layer", "duration_ns"])
        title = "Time per layer"
        if ly.empty:
            return c.empty(title + c.run_label(data, rank), "no timed layers in this run")
        g = ly.groupby("layer")["duration_ns"].agg(["median", "min", "max", "count"]).sort_index()
        unit, div = c.time_unit(float(g["max"].max()))
        med = (g["median"] / div).tolist()
        fig.add_trace(
            go.Bar(
                x=[int(v) for v in g.index],
                y=med,
                name=f"median over steps ({unit})",
                marker_color=c.REAL,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": ((g["max"] - g["median"]) / div).tolist(),
                    "arrayminus": ((g["median"] - g["min"]) / div).tolist(),
                    "color": c.NEUTRAL,
                },
                customdata=g["count"].astype(int).tolist(),
                hovertemplate=(
                    f"layer %{{x}}: median %{{y:.1f}} {unit} over %{{customdata}} steps"
                    "<extra></extra>"
                ),
            )
        )
        n = int(ly["step"].nunique())
        c.style(
            fig,
            f"{title}: median over {n} steps, bars span min to max{c.run_label(data, rank)}",
            "attention layer",
            f"layer time ({unit})",
        )
        fig.update_xaxes(dtick=1 if len(g) <= 30 else None)
        fig.update_layout(showlegend=True)
        return fig

    title = "GPU time per kernel"
    pick = c.kernel_rank(data, rank)
    if pick is not None:  # a Run: summed per name in SQL, the names labelled once each
        per = data.sql(
            "SELECT name, SUM(CAST(end_ns - start_ns AS DOUBLE)) / 1e3 AS sum, COUNT(*) AS count "
            "FROM kernels WHERE rank = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL "
            "GROUP BY name",
            (pick,),
        )
        launches = int(per["count"].sum()) if len(per) else 0
    else:
        kn = c.numeric(c.table(data, "kernels", rank), "start_ns", "end_ns")
        kn = kn.dropna(subset=["start_ns", "end_ns"])
        per = (
            kn.assign(dur=(kn["end_ns"] - kn["start_ns"]) / 1e3)
            .groupby("name", dropna=False)["dur"]
            .agg(["sum", "count"])
            .reset_index()
        )
        launches = len(kn)
    if not launches:
        return c.empty(title + c.run_label(data, rank), "no kernel records in this run")
    per["kernel"] = per["name"].map(lambda n: c.kernel_label(n))
    g = per.groupby("kernel")[["sum", "count"]].sum().sort_values("sum", ascending=False)
    names = len(g)
    if names > top:
        rest = g.iloc[top:]
        g = g.iloc[:top]
        g.loc[f"other kernels ({len(rest)} names)"] = [rest["sum"].sum(), rest["count"].sum()]
    total = float(per["sum"].sum())
    g = g.iloc[::-1]  # largest on top
    fig.add_trace(
        go.Bar(
            orientation="h",
            y=list(g.index),
            x=g["sum"].tolist(),
            name="GPU time summed over launches (µs)",
            marker_color=c.REAL,
            text=[f"{v:,.0f} µs ({100 * v / total:.0f}%), {int(n)}x" for v, n in g.values],
            textposition="auto",
            hovertemplate="%{y}: %{x:,.1f} µs<extra></extra>",
        )
    )
    c.style(
        fig,
        f"{title}: {launches} launches of {names} kernel names, {total:,.0f} µs in all"
        f"{c.run_label(data, rank)}",
        "GPU time (µs, summed over launches)",
        "",
        height=160 + 30 * len(g),
    )
    fig.update_layout(margin={"l": 330}, showlegend=True)
    fig.update_yaxes(automargin=True)
    return fig

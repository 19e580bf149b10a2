"""KV splits: S the run used vs S its real rows deserve, and the occupancy each gives."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from mlaprof.analysis.splits import decided_on_device
from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c

BY = ("step", "layer", "capture_size", "policy")
POW2_TICKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


def log_axis(fig: Any) -> None:
    """A log-scale S axis whose floor sits below 1: a bar of S = 1 starts at the floor and keeps
    its height (on an axis that starts at 1 it has none and vanishes)."""
    ys = [float(v) for t in fig.data for v in (t.y or ()) if v is not None and v == v and v > 0]
    top = max(ys, default=16.0)
    fig.update_yaxes(type="log", tickvals=POW2_TICKS, range=[math.log10(0.5), math.log10(top * 2)])


def _policies(data: Any, sp: pd.DataFrame, policy: str | Sequence[str] | None) -> list[str]:
    """The policies to draw: the asked ones, else the run's own, else every recorded one."""
    have = list(dict.fromkeys(sp["policy"].dropna().astype(str)))
    if policy is None:
        own = c.scenario_value(data, "policy")
        return [own] if own in have else have
    want = [policy] if isinstance(policy, str) else list(policy)
    unknown = [p for p in want if p not in have]
    if unknown:
        raise MlaprofError(
            f"no splits recorded for policy {', '.join(unknown)}; recorded: {', '.join(have)}"
        )
    return want


def _device_decided(sp: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Rows of policies that decide S on the device lose their host-modelled S used and frozen
    (the kernel picks S at every replay: never frozen); returns them and those policies."""
    pols = [p for p in dict.fromkeys(sp["policy"].dropna().astype(str)) if decided_on_device(p)]
    if pols:
        sp = sp.copy()
        sp.loc[sp["policy"].astype(str).isin(pols), ["used", "frozen"]] = float("nan")
    return sp, pols


def _note_device(fig: Any, pols: Sequence[str]) -> None:
    if pols:
        fig.add_annotation(
            xref="paper", yref="paper", x=0, y=1.02, xanchor="left", yanchor="bottom",
            showarrow=False, font={"size": 10, "color": c.NEUTRAL},
            text=f"{', '.join(pols)}: S decided on the device at replay (never frozen); "
            "only S deserved is drawn",
        )  # fmt: skip


def _target(data: Any, sp: pd.DataFrame) -> str | None:
    t = sp["target"].dropna()
    return str(t.iloc[0]) if len(t) else c.scenario_value(data, "target")


def splits_used_vs_deserved(
    data: Any,
    by: str = "step",
    policy: str | Sequence[str] | None = None,
    step: int | None = None,
    rank: int | None = None,
) -> Any:
    """S used vs S deserved (and the S a captured graph froze) per step, layer, capture size or
    policy. ``policy`` defaults to the run's own policy; ``step`` (for ``by="policy"``) defaults to
    the last step."""
    if by not in BY:
        raise MlaprofError(f"by must be one of {', '.join(BY)}, got {by!r}")
    if by == "layer":
        return _by_layer(data, policy, rank)
    go = c.go()
    sp = c.numeric(
        c.table(data, "splits", rank), "step", "capture_size", "used", "deserved", "frozen"
    )
    title = "KV splits S used vs deserved"
    if sp.empty:
        return c.empty(title + c.run_label(data, rank), "no KV-split records in this run")
    target = _target(data, sp)
    fig = go.Figure()
    sp, on_device = _device_decided(sp)
    y_title = "KV splits S (count, log scale)"
    if by == "policy":
        steps = sorted(sp["step"].dropna().unique())
        at = steps[-1] if step is None else step
        if at not in steps:
            raise MlaprofError(f"no splits recorded for step {step}")
        sp = sp[sp["step"] == at]
        pols = list(dict.fromkeys(sp["policy"].astype(str)))
        # one bar per policy: where a step repeats a policy (a damaged import), its worst row
        ratio = sp["used"].astype(float) / sp["deserved"].astype(float)
        sp = sp.assign(_r=ratio.fillna(float("inf"))).sort_values("_r", kind="stable")
        sp = sp.drop_duplicates(subset=["policy"], keep="first")
        sp = sp.set_index(sp["policy"].astype(str)).loc[pols]
        for col, label, color in (
            ("used", "S used (as the run's metadata drives it)", c.USED),
            ("deserved", "S deserved (real rows only)", c.DESERVED),
            ("frozen", "S frozen into a FULL graph captured with the dummy run", c.FROZEN),
        ):
            vals = sp[col]
            if vals.isna().all():
                continue
            fig.add_trace(
                go.Bar(
                    x=pols,
                    y=vals.tolist(),
                    name=label,
                    marker_color=color,
                    text=[f"{v:.0f}" if v == v else "" for v in vals],
                    textposition="outside",
                    hovertemplate="%{x}: S = %{y}<extra>%{fullData.name}</extra>",
                )
            )
        for pol in pols:  # policies that cannot run this shape: say so instead of a gap
            if sp.loc[pol, ["used", "deserved"]].isna().all():
                note = sp.loc[pol, "note"]
                why = "" if pd.isna(note) else str(note).removeprefix("not runnable: ")
                fig.add_annotation(
                    x=pol,
                    y=0,
                    yref="y",
                    text="not applicable" + (f":<br>{c.shorten(why, 40)}" if why else ""),
                    showarrow=False,
                    yanchor="bottom",
                    font={"size": 10, "color": c.NEUTRAL},
                )
        title += f" per policy at step {int(at)} on {c.target_label(target)}"
        c.style(fig, title + c.run_label(data, rank), "split policy (kernel heuristic)", y_title)
        fig.update_layout(barmode="group")
    elif by == "capture_size":
        pols = _policies(data, sp, policy)
        sp = sp[sp["policy"].isin(pols)].dropna(subset=["capture_size"])
        if sp.empty:
            return c.empty(title + c.run_label(data, rank), "no split record has a capture size")
        g = sp.groupby(["policy", "capture_size"])[["used", "deserved", "frozen"]].median()
        g = g.reset_index().sort_values("capture_size")
        for pol in pols:
            gp = g[g["policy"] == pol]
            for col, label, color in (
                ("used", "S used", c.USED),
                ("deserved", "S deserved", c.DESERVED),
                ("frozen", "S frozen in the captured graph", c.FROZEN),
            ):
                if gp[col].isna().all():
                    continue
                fig.add_trace(
                    go.Bar(
                        x=[str(int(v)) for v in gp["capture_size"]],
                        y=gp[col].tolist(),
                        name=label + (f" ({pol})" if len(pols) > 1 else ""),
                        marker_color=color,
                        opacity=1.0 if pol == pols[0] else 0.6,
                        text=[f"{v:.0f}" for v in gp[col]],
                        textposition="outside",
                        hovertemplate="capture size %{x}: S = %{y}<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per capture size, policy {', '.join(pols)} on {c.target_label(target)}"
        c.style(
            fig,
            title + " (median over steps)" + c.run_label(data, rank),
            "capture size (padded tokens)",
            y_title,
        )
        fig.update_layout(barmode="group")
        fig.update_xaxes(type="category")
    else:  # by step
        pols = _policies(data, sp, policy)
        for i, pol in enumerate(pols):
            sp_p = sp[sp["policy"] == pol].sort_values("step")
            suffix = f" ({pol})" if len(pols) > 1 else ""
            for col, label, color, dash in (
                ("used", "S used", c.USED, "solid"),
                ("deserved", "S deserved", c.DESERVED, "dash"),
                ("frozen", "S frozen in the captured graph", c.FROZEN, "dot"),
            ):
                if sp_p[col].isna().all():
                    continue
                fig.add_trace(
                    go.Scatter(
                        x=sp_p["step"].tolist(),
                        y=sp_p[col].tolist(),
                        mode="lines+markers",
                        name=label + suffix,
                        line={"color": color, "dash": dash, "width": 2 if i == 0 else 1},
                        marker={"symbol": ["circle", "square", "diamond", "cross"][i % 4]},
                        hovertemplate="step %{x}: S = %{y}<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per step, policy {', '.join(pols)} on {c.target_label(target)}"
        c.style(fig, title + c.run_label(data, rank), "engine step", y_title)
        fig.update_xaxes(dtick=1 if sp["step"].nunique() <= 20 else None)
    _note_device(fig, [p for p in on_device if p in pols])
    log_axis(fig)
    return fig


def _by_layer(data: Any, policy: str | Sequence[str] | None, rank: int | None) -> Any:
    go = c.go()
    ly = c.numeric(c.table(data, "layers", rank), "layer", "splits_used", "splits_deserved")
    ly = ly.dropna(subset=["layer"])
    pol = policy if isinstance(policy, str) else c.scenario_value(data, "policy") or "the run's"
    title = f"KV splits S used vs deserved per layer, policy {pol}"
    if ly.empty or ly["splits_used"].isna().all():
        return c.empty(title + c.run_label(data, rank), "no per-layer KV-split records in this run")
    g = ly.groupby("layer")[["splits_used", "splits_deserved"]].median().reset_index()
    fig = go.Figure()
    for col, label, color in (
        ("splits_used", "S used", c.USED),
        ("splits_deserved", "S deserved", c.DESERVED),
    ):
        if g[col].isna().all():  # no legend entry for a series with no bar
            if col == "splits_deserved":
                fig.add_annotation(
                    xref="paper", yref="paper", x=0, y=1.02, xanchor="left", yanchor="bottom",
                    showarrow=False, font={"size": 10, "color": c.NEUTRAL},
                    text="S deserved: not recorded (an imported trace's grid counts padding rows)",
                )  # fmt: skip
            continue
        fig.add_trace(
            go.Bar(
                x=g["layer"].astype(int).tolist(),
                y=g[col].tolist(),
                name=label,
                marker_color=color,
                text=[f"{v:.0f}" if v == v else "" for v in g[col]],
                textposition="outside",
                hovertemplate="layer %{x}: S = %{y}<extra>%{fullData.name}</extra>",
            )
        )
    c.style(
        fig,
        title + " (median over steps)" + c.run_label(data, rank),
        "attention layer",
        "KV splits S (count, log scale)",
    )
    fig.update_layout(barmode="group")
    fig.update_xaxes(dtick=1 if len(g) <= 30 else None)
    log_axis(fig)
    return fig


def occupancy(
    data: Any,
    by: str = "policy",
    policy: str | Sequence[str] | None = None,
    rank: int | None = None,
) -> Any:
    """Device occupancy (% of CUs/SMs busy with real work) with S used vs S deserved, per policy
    (median over steps) or per step."""
    if by not in ("policy", "step"):
        raise MlaprofError(f"by must be 'policy' or 'step', got {by!r}")
    go = c.go()
    sp = c.numeric(c.table(data, "splits", rank), "step", "occupancy_used", "occupancy_deserved")
    title = "Occupancy (model) with S used vs S deserved"
    sp = sp.dropna(subset=["occupancy_used", "occupancy_deserved"], how="all")
    if sp.empty:
        return c.empty(title + c.run_label(data, rank), "no occupancy records in this run")
    target = _target(data, sp)
    units = c.unit_name(target)
    fig = go.Figure()
    if by == "policy":
        pols = list(dict.fromkeys(sp["policy"].astype(str)))
        if policy is not None:
            pols = _policies(data, sp, policy)
        g = sp.groupby("policy")[["occupancy_used", "occupancy_deserved"]].median().loc[pols]
        for col, label, color in (
            ("occupancy_used", "with S used", c.USED),
            ("occupancy_deserved", "with S deserved", c.DESERVED),
        ):
            pct = (g[col] * 100).tolist()
            fig.add_trace(
                go.Bar(
                    x=pols,
                    y=pct,
                    name=label,
                    marker_color=color,
                    text=[f"{v:.1f}%" for v in pct],
                    textposition="outside",
                    hovertemplate="%{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
                )
            )
        n = int(sp["step"].nunique())
        title += f" per policy on {c.target_label(target)} (median over {n} steps)"
        c.style(
            fig, title + c.run_label(data, rank), "split policy", f"{units} busy with real work (%)"
        )
        fig.update_layout(barmode="group")
    else:
        pols = _policies(data, sp, policy)
        for pol in pols:
            sp_p = sp[sp["policy"] == pol].sort_values("step")
            suffix = f" ({pol})" if len(pols) > 1 else ""
            for col, label, color, dash in (
                ("occupancy_used", "with S used", c.USED, "solid"),
                ("occupancy_deserved", "with S deserved", c.DESERVED, "dash"),
            ):
                fig.add_trace(
                    go.Scatter(
                        x=sp_p["step"].tolist(),
                        y=(sp_p[col] * 100).tolist(),
                        mode="lines+markers",
                        name=label + suffix,
                        line={"color": color, "dash": dash},
                        hovertemplate="step %{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per step, policy {', '.join(pols)} on {c.target_label(target)}"
        c.style(
            fig, title + c.run_label(data, rank), "engine step", f"{units} busy with real work (%)"
        )
    top = float(sp[["occupancy_used", "occupancy_deserved"]].max().max()) * 100
    fig.update_yaxes(range=[0, max(110.0, top * 1.12)])
    return fig

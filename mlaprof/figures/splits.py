"""KV splits: S the run used vs S its real rows deserve, and the occupancy each gives, as the
summary's series holds them (:mod:`mlaprof.analysis.series`)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from mlaprof.analysis.sections import WHAT_IF, device_cap_text, no_s_text
from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c
from mlaprof.figures._common import is_empty

BY = ("step", "layer", "capture_size", "policy")
POW2_TICKS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
S_AXIS = "KV splits S (count)"


def log_axis(fig: Any) -> None:
    """A log-scale S axis for lines whose floor sits below 1, so S = 1 points stay inside."""
    ys = [float(v) for t in fig.data for v in (t.y or ()) if v is not None and v == v and v > 0]
    top = max(ys, default=16.0)
    fig.update_yaxes(type="log", tickvals=POW2_TICKS, range=[math.log10(0.5), math.log10(top * 2)])


def bar_axis(fig: Any) -> None:
    """Bars of S on a log2 axis (ticks 1, 2, 4, ... 256) from 1/2: S runs from 1 to 256, and on a
    linear axis to 256 a bar of S = 1 beside one of S = 4 were both flat (the finding itself);
    here each doubling is one step of height, a bar of S = 1 is one step tall and its value is
    written on it."""
    ys = [float(v) for t in fig.data for v in (t.y or ()) if v is not None and v == v and v > 0]
    top = max(ys, default=16.0)
    fig.update_yaxes(type="log", tickvals=POW2_TICKS, ticktext=[str(v) for v in POW2_TICKS],
                     range=[math.log10(0.5), math.log10(top * 3)])  # fmt: skip


def _policies(rs: Any, policy: str | Sequence[str] | None) -> list[str]:
    """The policies to draw: the asked ones, else the run's own, else every recorded one."""
    have = rs.policies
    if policy is None:
        return [rs.policy] if rs.policy in have else have
    want = [policy] if isinstance(policy, str) else list(policy)
    unknown = [p for p in want if p not in have]
    if unknown:
        raise MlaprofError(
            f"no splits recorded for policy {', '.join(unknown)}; recorded: {', '.join(have)}"
        )
    return want


def _note_device(fig: Any, pols: Sequence[str]) -> None:
    if pols:
        _note(fig, f"{', '.join(pols)}: S decided on the device at replay (never frozen); "
                   "only S deserved is drawn")  # fmt: skip


def _note(fig: Any, text: str) -> None:
    """A note under the x axis's title, in small grey lines (drawn above the plot, where the
    legend is, it sat on the legend's entries)."""
    title = fig.layout.xaxis.title.text or ""
    fig.update_xaxes(title_text=f"{title}<br><span style='font-size:10px;color:{c.NEUTRAL}'>"
                                f"{c.lines(text)}</span>")  # fmt: skip


def _no_s(rs: Any, pols: Sequence[str]) -> list[str]:
    """Why each of ``pols`` that holds no S at all (used, deserved nor frozen) is not drawn, in
    the section's words (:func:`no_s_text`: "not runnable: ..."), as "policy: why"."""
    out = []
    for pol in pols:
        pts = [p for p in rs.splits if p.policy == pol]
        if any(v is not None for p in pts for v in (p.used, p.deserved, p.frozen)):
            continue
        said = next((w for p in pts if (w := no_s_text(p)) is not None), None)
        out.append(f"{pol}: {said or 'no S recorded'}")
    return out


def _said_or_empty(fig: Any, rs: Any, pols: Sequence[str], title: str) -> Any:
    """``fig``, with a note naming each policy it draws nothing for and why; where it draws
    nothing at all, the placeholder that says why (every figure's "nothing to draw")."""
    gone = _no_s(rs, pols)
    if not fig.data:
        return c.empty(title, c.lines("; ".join(gone) or "no S recorded for the policies asked"))
    if gone:
        _note(fig, "; ".join(gone))
    return fig


def _frozen(rs: Any, name: str, what_if: str | None = None) -> str:
    """The frozen series' name with the conditions the analysis says it holds on (the splits
    table's cell and the finding say the same: "if it captures"; ``what_if``: the policy's
    points' ``frozen_what_if``, "if vLLM ran <policy> (a what-if: ...)", where vLLM does not
    run it here)."""
    conds = [x for x in (what_if, rs.frozen_if) if x]
    return f"{name} ({', '.join(conds)})" if conds else name


def _named(rs: Any, pols: Sequence[str]) -> str:
    """The policies a figure's title names, each vLLM does not run here marked what-if (its
    points' ``what_if``: the splits rows' condition, said in full by :func:`_note_what_if`)."""
    return ", ".join(f"{p} ({WHAT_IF})" if _condition(rs, p) else p for p in pols)


def _condition(rs: Any, pol: str) -> str | None:
    return next((p.what_if for p in rs.splits if p.policy == pol and p.what_if), None)


def _note_what_if(fig: Any, rs: Any, pols: Sequence[str]) -> None:
    """The condition each drawn policy vLLM does not run here holds on, in the rows' words."""
    said = list(dict.fromkeys(w for p in pols if (w := _condition(rs, p))))
    if said:
        _note(fig, "; ".join(said))


def _what_if(points: Sequence[Any]) -> str | None:
    """The what-if condition of a policy's frozen S, as its points hold it (None: none)."""
    return next((p.frozen_what_if for p in points if p.frozen_what_if), None)


# the per-policy bars' what-if frozen series: each bar's own condition in its hover
WHAT_IF_FROZEN = "S frozen only if vLLM ran the policy (a what-if: not this configuration's route)"


def _upright(said: str, width: int = 30) -> str:
    """``said`` broken into short lines for an upright note, between words only (a ``<br>`` read
    as a space gives ``said`` back): what comes before its first ": " on a line of its own."""
    head, sep, rest = said.partition(": ")
    first, rest = ([head + ":"], rest) if sep else ([], said)
    wrapped = textwrap.wrap(rest, width, break_long_words=False, break_on_hyphens=False)
    return "<br>".join([*first, *wrapped])


def _target(rs: Any) -> str:
    """The device preset the S are for, with where they come from in the splits table's words
    (the series' ``split_scope``): a CPU run's S read "(modelled)", never as measured there."""
    return f"{c.target_label(rs.target)} ({rs.split_scope})"


def _text(vals: list[float | None]) -> list[str]:
    return ["" if v is None else f"{v:.0f}" for v in vals]


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
    rs, label = c.series_of(data, "splits", rank)
    title = "KV splits S used vs deserved"
    if rs is None or not rs.splits:
        return c.empty(title + label, "no KV-split records in this run")
    fig = c.figure()
    on_device = list(dict.fromkeys(p.policy for p in rs.splits if p.on_device))
    if by == "policy":
        steps = sorted({p.step for p in rs.splits if p.step is not None})
        at = steps[-1] if step is None else step
        if at not in steps:
            raise MlaprofError(f"no splits recorded for step {step}")
        row = {p.policy: p for p in rs.splits if p.step == at}
        pols = list(row)
        # a frozen S of a policy vLLM does not run here is a what-if: its own hatched bars,
        # each saying its condition (the splits rows' frozen_what_if), never the run's frozen S
        ran = [None if row[p].frozen_what_if else row[p].frozen for p in pols]
        was = [row[p].frozen if row[p].frozen_what_if else None for p in pols]
        for vals, name, color, what_if in (
            ([row[p].used for p in pols], "S used (as the run's metadata drives it)", c.USED,
             False),
            ([row[p].deserved for p in pols], "S deserved (real rows only)", c.DESERVED, False),
            (ran, _frozen(rs, "S frozen into a FULL graph captured with the dummy run"),
             c.FROZEN, False),
            (was, _frozen(rs, WHAT_IF_FROZEN), c.FROZEN, True),
        ):  # fmt: skip
            if all(v is None for v in vals):
                continue
            fig.add_trace(
                go.Bar(
                    x=pols,
                    y=vals,
                    name=name,
                    marker_color=color,
                    marker_pattern_shape="/" if what_if else "",
                    text=_text(vals),
                    textposition="outside",
                    customdata=[row[p].frozen_what_if or "" for p in pols] if what_if else None,
                    hovertemplate="%{x}: S = %{y} frozen %{customdata}<extra></extra>"
                    if what_if
                    else "%{x}: S = %{y}<extra>%{fullData.name}</extra>",
                )  # fmt: skip
            )
        for pol in pols:  # a policy with no S (cannot run, none recorded): why, not a gap
            # the section's words for the row (no_s_text, what the report says under its
            # splits table); the figure only breaks them into lines
            said = no_s_text(row[pol])
            if said is None:
                continue
            text = _upright(said)
            # upright in the policy's own column, from the axis up: beside bars whose
            # values are written over them, a level note ran across those labels
            fig.add_annotation(
                x=pol, y=0, yref="paper", showarrow=False, yanchor="bottom", textangle=-90,
                text=text, font={"size": 10, "color": c.NEUTRAL},
            )  # fmt: skip
        title += f" per policy at step {int(at)} on {_target(rs)}"
        c.style(fig, title + label, "split policy (kernel heuristic)", S_AXIS)
        fig.update_layout(barmode="group")
        bar_axis(fig)
    elif by == "capture_size":
        pols = _policies(rs, policy)
        meds = [m for m in rs.split_medians if m.policy in pols]
        if not meds:
            return c.empty(title + label, "no split record has a capture size")
        for pol in pols:
            gp = [m for m in meds if m.policy == pol]
            for col, name, color in (
                ("used", "S used", c.USED),
                ("deserved", "S deserved", c.DESERVED),
                ("frozen", _frozen(rs, "S frozen in the captured graph", _what_if(gp)), c.FROZEN),
            ):
                vals = [getattr(m, col) for m in gp]
                if all(v is None for v in vals):
                    continue
                fig.add_trace(
                    go.Bar(
                        x=[str(m.capture_size) for m in gp],
                        y=vals,
                        name=name + (f" ({pol})" if len(pols) > 1 else ""),
                        marker_color=color,
                        opacity=1.0 if pol == pols[0] else 0.6,
                        text=_text(vals),
                        textposition="outside",
                        hovertemplate="capture size %{x}: S = %{y}<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per capture size, policy {_named(rs, pols)} on {_target(rs)}"
        title += " (median over steps)" + label
        c.style(fig, title, "capture size (padded tokens)", S_AXIS)
        fig.update_layout(barmode="group")
        fig.update_xaxes(type="category")
        bar_axis(fig)
        fig = _said_or_empty(fig, rs, pols, title)
        if is_empty(fig):
            return fig
    else:  # by step
        pols = _policies(rs, policy)
        for i, pol in enumerate(pols):
            pts = [p for p in rs.splits if p.policy == pol]
            suffix = f" ({pol})" if len(pols) > 1 else ""
            frozen = _frozen(rs, "S frozen in the captured graph", _what_if(pts))
            for col, name, color, dash in (
                ("used", "S used", c.USED, "solid"),
                ("deserved", "S deserved", c.DESERVED, "dash"),
                ("frozen", frozen, c.FROZEN, "dot"),
            ):
                vals = [getattr(p, col) for p in pts]
                if all(v is None for v in vals):
                    continue
                fig.add_trace(
                    go.Scatter(
                        x=[p.step for p in pts],
                        y=vals,
                        mode="lines+markers",
                        name=name + suffix,
                        line={"color": color, "dash": dash, "width": 2 if i == 0 else 1},
                        marker={"symbol": ["circle", "square", "diamond", "cross"][i % 4]},
                        hovertemplate="step %{x}: S = %{y}<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per step, policy {_named(rs, pols)} on {_target(rs)}"
        c.style(fig, title + label, "engine step", S_AXIS + ", log scale")
        n_steps = len({p.step for p in rs.splits})
        fig.update_xaxes(dtick=1 if n_steps <= 20 else None)
        log_axis(fig)
        fig = _said_or_empty(fig, rs, pols, title + label)
        if is_empty(fig):
            return fig
    _note_device(fig, [p for p in on_device if p in pols])
    if by != "policy":  # the per-policy bars say each what-if in their own series and hover
        _note_what_if(fig, rs, pols)
    return fig


def _by_layer(data: Any, policy: str | Sequence[str] | None, rank: int | None) -> Any:
    """S per layer as the summary's layer table gives it: S used (the layer's last record) and
    the S it is judged against (deserved by the real rows, or for an imported trace the fix's S
    for the same rows); a series the run lacks has no legend entry, a note says so."""
    go = c.go()
    rs, label = c.series_of(data, "layers", rank)
    pol = policy if isinstance(policy, str) else (rs.policy if rs else None)
    # an imported trace records no policy: said so, never "policy the run's"
    title = "KV splits S used vs deserved per layer, " + (
        f"policy {_named(rs, [pol]) if rs is not None else pol}"
        if pol
        else "split policy not recorded"
    )
    rows = rs.layer_s if rs is not None else ()
    # where the device decides S the records hold the grid's cap: never drawn as an S, said
    caps = sorted({r.grid_cap for r in rows if r.used is None and r.grid_cap is not None})
    if not rows or (all(r.used is None for r in rows) and not caps):
        return c.empty(title + label, "no per-layer KV-split records in this run")
    deserved = all(r.reference_is_deserved for r in rows if r.reference is not None)
    ref_name = "S deserved (real rows only)" if deserved else "S the fix gives for the same rows"
    fig = c.figure()
    note = None
    for col, name, color in (("used", "S used", c.USED), ("reference", ref_name, c.DESERVED)):
        vals = [getattr(r, col) for r in rows]
        if all(v is None for v in vals):  # no legend entry for a series with no bar
            if col == "reference":
                note = "; ".join(x for x in (note, "S deserved: not recorded (an imported "
                    "trace's grid counts padding rows) and no modelled fix for this path") if x)  # fmt: skip
            elif caps:
                note = (f"S used: not drawn, the layer records hold the launch grid's "
                        f"{', '.join(device_cap_text(x) for x in caps)}")  # fmt: skip
            continue
        fig.add_trace(
            go.Bar(
                x=[r.layer for r in rows],
                y=vals,
                name=name,
                marker_color=color,
                text=_text(vals),
                textposition="outside",
                hovertemplate="layer %{x}: S = %{y}<extra>%{fullData.name}</extra>",
            )
        )
    c.style(fig, title + " (last step recorded)" + label, "attention layer", S_AXIS)
    fig.update_layout(barmode="group")
    fig.update_xaxes(dtick=1 if len(rows) <= 30 else None)
    bar_axis(fig)
    if note:
        _note(fig, note)
    if pol and rs is not None:
        _note_what_if(fig, rs, [pol])
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
    rs, label = c.series_of(data, "splits", rank)
    title = "Occupancy (model) with S used vs S deserved"
    if rs is None or not rs.occupancy:
        return c.empty(title + label, "no occupancy records in this run")
    units = c.unit_name(rs.target)
    fig = c.figure()
    pcts: list[float] = []

    def pct(vals: list[float | None]) -> list[float | None]:
        out = [None if v is None else v * 100 for v in vals]
        pcts.extend(v for v in out if v is not None)
        return out

    if by == "policy":
        occ = {o.policy: o for o in rs.occupancy}
        pols = list(occ) if policy is None else _policies(rs, policy)
        for col, name, color in (("used", "with S used", c.USED),
                                 ("deserved", "with S deserved", c.DESERVED)):  # fmt: skip
            ys = pct([getattr(occ[p], col) for p in pols])
            fig.add_trace(
                go.Bar(
                    x=pols,
                    y=ys,
                    name=name,
                    marker_color=color,
                    text=["" if v is None else f"{v:.1f}%" for v in ys],
                    textposition="outside",
                    hovertemplate="%{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
                )  # fmt: skip
            )
        n = max(o.steps for o in rs.occupancy)
        title += f" per policy on {c.target_label(rs.target)} (median over {n} steps)"
        c.style(fig, title + label, "split policy", f"{units} busy with real work (%)")
        fig.update_layout(barmode="group")
    else:
        pols = _policies(rs, policy)
        for pol in pols:
            pts = [p for p in rs.splits if p.policy == pol]
            suffix = f" ({pol})" if len(pols) > 1 else ""
            for col, name, color, dash in (
                ("occupancy_used", "with S used", c.USED, "solid"),
                ("occupancy_deserved", "with S deserved", c.DESERVED, "dash"),
            ):
                fig.add_trace(
                    go.Scatter(
                        x=[p.step for p in pts],
                        y=pct([getattr(p, col) for p in pts]),
                        mode="lines+markers",
                        name=name + suffix,
                        line={"color": color, "dash": dash},
                        hovertemplate="step %{x}: %{y:.1f}%<extra>%{fullData.name}</extra>",
                    )
                )
        title += f" per step, policy {_named(rs, pols)} on {c.target_label(rs.target)}"
        c.style(fig, title + label, "engine step", f"{units} busy with real work (%)")
        _note_what_if(fig, rs, pols)
    fig.update_yaxes(range=[0, max(110.0, max(pcts, default=0.0) * 1.12)])
    return fig

"""What-if heatmaps: S with the padding bug, with the fix and frozen at capture, and the predicted
slowdown, over batch size x KV length, for one (model, spec tokens, policy, device) slice of a
:class:`~mlaprof.whatif.WhatIf` grid. Every title says the numbers are modelled and for what."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c

S_PANELS = (
    ("S_bug", "S with the padding bug (min_kv over all rows)"),
    ("S_fix", "S with the fix (min_kv over active rows)"),
    ("S_frozen", "S frozen at capture (dummy run, KV = qlen)"),
)
SLOWDOWN = {"bug": "slowdown_bug", "frozen": "slowdown_frozen"}


def _cells(data: Any) -> tuple[pd.DataFrame, str]:
    """(cells, run label) from a WhatIf, a cells DataFrame or a Run (grid of its scenario)."""
    if isinstance(data, pd.DataFrame):
        return data, ""
    if hasattr(data, "cells"):
        return data.cells, ""
    # a summary (its scenario section) or a Run (its run.json): the grid of that scenario
    sc = getattr(data, "scenario", None)
    if sc is not None and not isinstance(sc, dict):  # the summary's typed section
        from mlaprof.analysis.typed_json import to_json

        sc = {k: v for k, v in to_json(sc).items() if v is not None}
    if not isinstance(sc, dict):
        sc = c.meta(data).get("scenario")
    ser = getattr(data, "series", None)
    label = ser.label() if hasattr(ser, "label") else c.run_label(data)
    if not isinstance(sc, dict) or not {"model", "policy", "target"} <= set(sc):
        return pd.DataFrame(), label
    from mlaprof.whatif.grid import grid_for_scenario

    return grid_for_scenario(sc).cells, label


def _pick(cells: pd.DataFrame, col: str, want: Any) -> Any:
    have = list(dict.fromkeys(cells[col]))
    if want is None:
        return have[0]
    if want not in have:
        raise MlaprofError(f"no {col} {want!r} in the grid (it has {', '.join(map(str, have))})")
    return want


def whatif_heatmap(
    data: Any,
    model: str | None = None,
    policy: str | None = None,
    device: str | None = None,
    spec_tokens: int | None = None,
    slowdown: str = "bug",
) -> Any:
    """2 x 2 heatmaps over batch (real requests) x KV length: S bug / fix / frozen and the
    predicted slowdown (``slowdown``: "bug" or "frozen", each vs the fix)."""
    if slowdown not in SLOWDOWN:
        raise MlaprofError(f"slowdown must be 'bug' or 'frozen', got {slowdown!r}")
    cells, label = _cells(data)
    title = "What-if: KV splits and predicted slowdown over batch x KV length"
    if cells.empty:
        return c.empty(title + label, "no scenario (model, policy, device) to model in this run")
    model = _pick(cells, "model", model)
    policy = _pick(cells, "policy", policy)
    device = _pick(cells, "device", device)
    spec_tokens = _pick(cells, "spec_tokens", spec_tokens)
    sel = cells[
        (cells.model == model)
        & (cells.policy == policy)
        & (cells.device == device)
        & (cells.spec_tokens == spec_tokens)
    ]
    first = sel.iloc[0]
    go = c.go()
    slow_col = SLOWDOWN[slowdown]
    fig = c.subplots()(
        rows=2,
        cols=2,
        subplot_titles=[t for _, t in S_PANELS] + [f"predicted slowdown, {slowdown} vs fix (x)"],
        horizontal_spacing=0.09,
        vertical_spacing=0.14,
    )
    drawn = bool((sel.draw > 0).any())  # batches drawn from a request-length mix
    rows_by = "draw" if drawn else "context"
    x = [str(b) for b in sorted(sel.batch.unique())]
    y = [f"#{v}" if drawn else f"{v:,}" for v in sorted(sel[rows_by].unique())]

    def grid(col: str) -> pd.DataFrame:
        return sel.pivot(index=rows_by, columns="batch", values=col).sort_index()

    pad = grid("padding_rows").to_numpy()
    for i, (col, _) in enumerate(S_PANELS):
        s_val = grid(col).to_numpy(float, copy=True)
        s_val[s_val == 0] = np.nan  # 0: not applicable / the kernel refuses the shape
        text = [
            ["n/a" if v != v else f"{int(v)}{'*' if p else ''}" for v, p in zip(r, pr, strict=True)]
            for r, pr in zip(s_val, pad, strict=True)
        ]
        fig.add_trace(
            go.Heatmap(
                z=np.log2(s_val),  # colour on a log scale: S spans 1..256
                x=x,
                y=y,
                text=text,
                texttemplate="%{text}" if s_val.size <= 400 else None,
                coloraxis="coloraxis",
                name=col,
                hovertemplate="batch %{x}, KV %{y}: S = %{text}<extra>" + col + "</extra>",
            ),
            row=1 + i // 2,
            col=1 + i % 2,
        )
    zs = grid(slow_col).to_numpy(float)
    fig.add_trace(
        go.Heatmap(
            z=zs,
            x=x,
            y=y,
            coloraxis="coloraxis2",
            name=slow_col,
            hovertemplate="batch %{x}, KV %{y}: %{z:.2f}x slower<extra>" + slow_col + "</extra>",
        ),
        row=2,
        col=2,
    )
    t_model = str(first.time_model)
    c.style(
        fig,
        f"{title}{label}<br><sup>"
        + c.lines(
            f"modelled for {model} ({first.heads} heads), qlen {first.qlen}, policy "
            f"{policy}, {c.target_label(device)}; * = padding rows; time: {t_model}",
            150,
        ).replace("<br>", "</sup><br><sup>")
        + "</sup>",
        "real requests in the batch (count)",
        "drawn batch (count, sorted by its shortest request)"
        if drawn
        else "KV length per request (tokens)",
        height=760,
    )
    fig.update_layout(
        coloraxis={
            "colorscale": "Viridis",
            "cmin": 0,
            "cmax": 8,
            "colorbar": {
                "title": "S (count, log scale)",
                "x": 1.0,
                "len": 0.45,
                "y": 0.78,
                "tickvals": list(range(9)),
                "ticktext": [str(2**i) for i in range(9)],
            },
        },
        coloraxis2={
            "colorscale": "Reds",
            "cmin": 1.0,
            "colorbar": {"title": "slowdown (x)", "x": 1.0, "len": 0.45, "y": 0.22},
        },
        margin={"t": 150},  # the title and a subtitle of up to 2 lines above the panel titles
    )
    fig.update_yaxes(type="category")
    fig.update_xaxes(type="category")
    return fig

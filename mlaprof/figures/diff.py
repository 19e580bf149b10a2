"""Two-run diff: the same metrics computed on run A and run B, and how much each changed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mlaprof.figures import _common as c

CAP_PCT = 400.0  # bars longer than this are clipped (the label keeps the real numbers)


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    lower_is_better: bool
    fn: Callable[[Any], float]


def _col(data: Any, table: str, col: str) -> pd.Series:
    return pd.to_numeric(c.table(data, table)[col], errors="coerce").dropna()


def _median(data: Any, table: str, col: str, scale: float = 1.0) -> float:
    s = _col(data, table, col)
    return float(s.median()) / scale if len(s) else math.nan


def _own_splits(data: Any) -> pd.DataFrame:
    sp = c.table(data, "splits")
    own = c.scenario_value(data, "policy")
    if own is not None and (sp["policy"] == own).any():
        sp = sp[sp["policy"] == own]
    return c.numeric(sp, "used", "deserved", "occupancy_used")


def _sync_sites(data: Any) -> float:
    """Distinct (op, source line) pairs that synced or allocated inside the watched region.
    Sites, not events: a CPU run may watch every layer of a step while a GPU capture stops at
    the first offender, and both name the same lines."""
    sy = c.table(data, "syncs")
    if sy.empty:
        return 0.0 if len(c.table(data, "layers")) else math.nan
    return float(len(sy[["op", "location"]].astype(str).drop_duplicates()))


def _padding_share(data: Any) -> float:
    p = c.numeric(c.table(data, "padding"), "real_rows", "padding_rows")
    tot = p["real_rows"].sum() + p["padding_rows"].sum()
    return 100.0 * p["padding_rows"].sum() / tot if tot else math.nan


def _capture_mib(data: Any) -> float:
    m = c.numeric(c.table(data, "memory"), "driver_bytes")
    return float(m["driver_bytes"].sum()) / c.MIB if m["driver_bytes"].notna().any() else math.nan


def _failed_captures(data: Any) -> float:
    cap = c.table(data, "captures")
    return float(cap["status"].isin(c.FAILED_CAPTURE).sum()) if len(cap) else math.nan


def _full_share(data: Any) -> float:
    """Steps replayed as a graph: FULL for live runs, "graph" for an imported trace's replays."""
    st = c.table(data, "steps")
    return 100.0 * float(st["graph_mode"].isin(("FULL", "graph")).mean()) if len(st) else math.nan


def _trace_splits(data: Any) -> float:
    """S per MLA layer as an imported trace's grids show it (NaN for live runs: they record
    split metadata per policy instead)."""
    if not c.meta(data).get("imported_from"):
        return math.nan
    return _median(data, "layers", "splits_used")


def _split_ratio(data: Any) -> float:
    sp = _own_splits(data).dropna(subset=["used", "deserved"])
    return float((sp["used"] / sp["deserved"]).median()) if len(sp) else math.nan


METRICS: tuple[Metric, ...] = (
    Metric("median step time", "µs", True, lambda d: _median(d, "steps", "duration_ns", 1e3)),
    Metric("median layer time", "µs", True, lambda d: _median(d, "layers", "duration_ns", 1e3)),
    Metric("sync / allocation sites in the region", "count", True, _sync_sites),
    Metric("steps replayed as a graph (FULL)", "%", False, _full_share),
    Metric("KV splits per MLA layer (trace grids, median)", "S", False, _trace_splits),
    Metric("failed or predicted-failing captures", "count", True, _failed_captures),
    Metric(
        "KV splits used (run's policy, median)",
        "S",
        False,
        lambda d: float(_own_splits(d)["used"].median()),
    ),
    Metric("S used / S deserved (median)", "ratio", False, _split_ratio),
    Metric(
        "occupancy with S used (median)",
        "%",
        False,
        lambda d: 100.0 * float(_own_splits(d)["occupancy_used"].median()),
    ),
    Metric("padding rows", "% of rows", True, _padding_share),
    Metric("capture memory, driver view", "MiB", True, _capture_mib),
)


def diff_table(a: Any, b: Any) -> pd.DataFrame:
    """One row per metric both runs have: value in A and B, change, ratio and whether B is better.

    ``verdict`` is ``better`` / ``worse`` / ``same`` from B's point of view."""
    rows = []
    for m in METRICS:
        va, vb = m.fn(a), m.fn(b)
        if va != va and vb != vb:  # neither run has it
            continue
        change = vb - va if va == va and vb == vb else math.nan
        if change != change:
            verdict = "n/a"
        elif abs(change) <= 1e-9 * max(1.0, abs(va)):
            verdict = "same"
        else:
            verdict = "better" if (change < 0) == m.lower_is_better else "worse"
        rows.append(
            {
                "metric": m.name,
                "unit": m.unit,
                "a": va,
                "b": vb,
                "change": change,
                "change_pct": 100.0 * change / abs(va) if va and va == va else math.nan,
                "ratio": vb / va if va and va == va and vb == vb else math.nan,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(
        rows, columns=["metric", "unit", "a", "b", "change", "change_pct", "ratio", "verdict"]
    )


def _fmt(v: float) -> str:
    if v != v:
        return "–"
    return f"{v:.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:.3g}"


def run_diff(a: Any, b: Any, label_a: str | None = None, label_b: str | None = None) -> Any:
    """Horizontal bars: % change of each metric from run A to run B, green where B is better,
    red where worse; labels give both values (and the ratio)."""
    go = c.go()
    la = label_a or getattr(a, "name", None) or "A"
    lb = label_b or getattr(b, "name", None) or "B"
    t = diff_table(a, b)
    title = f"What changed from A ({la}) to B ({lb})"
    if t.empty:
        return c.empty(title, "the two runs share no metric")
    t = t.iloc[::-1].reset_index(drop=True)  # first metric on top
    ys = [f"{r.metric} ({r.unit})" for r in t.itertuples()]
    fig = go.Figure()
    xmax = 10.0
    for verdict, color, label in (
        ("better", c.BETTER, "B is better"),
        ("worse", c.WORSE, "B is worse"),
        ("same", c.NEUTRAL, "unchanged"),
        ("n/a", "#c7c7c7", "only one run has it"),
    ):
        sel = t[t["verdict"] == verdict]
        if sel.empty:
            continue
        xs, texts = [], []
        for r in sel.itertuples():
            pct = r.change_pct
            if pct != pct:  # A is zero or missing: draw at the cap in the direction of change
                pct = (
                    0.0
                    if r.change != r.change or r.change == 0
                    else math.copysign(CAP_PCT, r.change)
                )
            xs.append(max(-CAP_PCT, min(CAP_PCT, pct)))
            xmax = max(xmax, abs(xs[-1]))
            ratio = f", ×{r.ratio:.2f}" if r.ratio == r.ratio else ""
            texts.append(f"{_fmt(r.a)} → {_fmt(r.b)}{ratio}")
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=[ys[i] for i in sel.index],
                x=xs,
                name=label,
                marker_color=color,
                text=texts,
                textposition="outside",
                cliponaxis=False,
                hovertemplate="%{y}: %{text}<extra>%{fullData.name}</extra>",
            )
        )
    c.style(
        fig,
        title,
        f"change from A to B (%; bars clipped at ±{CAP_PCT:.0f}%, labels give A → B)",
        "",
        height=160 + 38 * len(t),
    )
    fig.update_layout(barmode="overlay", margin={"l": 280, "r": 140})
    fig.update_yaxes(categoryorder="array", categoryarray=ys, automargin=True)
    fig.update_xaxes(zeroline=True, zerolinecolor="#444", range=[-xmax * 1.7, xmax * 1.7])
    return fig

"""Two-run diff: the same metrics computed on run A and run B, and how much each changed."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.errors import MlaprofError
from mlaprof.figures import _common as c

if TYPE_CHECKING:
    from mlaprof.analysis.diff import SummaryDiff

CAP_PCT = 400.0  # bars longer than this are clipped (the label keeps the real numbers)
# a colour per verdict of the diff (mlaprof.analysis.diff.Verdict, by value); a verdict not
# named here is drawn all the same, in UNNAMED: every row of the compare section is a bar
COLORS = {
    "better": c.BETTER,
    "worse": c.WORSE,
    "same": c.NEUTRAL,
    "within spread": "#bcbd22",
    "n/a": "#c7c7c7",
    "other workload": "#17becf",
}
UNNAMED = "#8c564b"


def diff_of(a: Any, b: Any | None = None) -> SummaryDiff:
    """The analysis' diff: ``a`` itself, or that of the run summaries ``a`` (before) and ``b``
    (after) (:func:`mlaprof.analysis.diff.diff`)."""
    from mlaprof.analysis.diff import SummaryDiff, diff
    from mlaprof.analysis.run_summary import require_summary

    if b is None:
        if not isinstance(a, SummaryDiff):
            raise MlaprofError(f"expected the analysis' diff of two runs, got {type(a).__name__}")
        return a
    return diff(require_summary(a, "the diff"), require_summary(b, "the diff"))


def diff_table(a: Any, b: Any | None = None) -> pd.DataFrame:
    """The run diff of :mod:`mlaprof.analysis.diff` as a DataFrame: ``a`` is that diff, or
    ``a`` and ``b`` are two run summaries. One row per metric, with A, B, change and the
    verdict from B's point of view."""
    from mlaprof.analysis.diff import COLUMNS
    from mlaprof.analysis.typed_json import to_json

    d = diff_of(a, b)
    return pd.DataFrame([to_json(r) for r in d.table], columns=list(COLUMNS)).astype(
        {k: float for k in ("a", "b", "change", "change_pct", "ratio")}
    )


def _fmt(v: float) -> str:
    from mlaprof.analysis.diff import fmt_value

    return fmt_value(None if v != v else v)


def run_diff(
    a: Any, b: Any | None = None, label_a: str | None = None, label_b: str | None = None
) -> Any:
    """Horizontal bars: % change of each metric from run A to run B, one legend entry per
    verdict of the diff, as the compare section words it ("B is better", "B is other
    workload": two workloads get no verdict here either); labels give both values (and the
    ratio); the section's workload line (and which run did not finish) under the axis.
    ``a``: the analysis' diff, or ``a`` and ``b``: two run summaries."""
    from mlaprof.analysis.diff import Verdict, unfinished_note
    from mlaprof.reporters.diff_rows import HEAD

    go = c.go()
    diff = diff_of(a, b)
    la = label_a or diff.before or "A"
    lb = label_b or diff.after or "B"
    t = diff_table(diff)
    title = f"What changed from A ({la}) to B ({lb})"
    if t.empty:
        return c.empty(title, "the two runs share no metric")
    t = t.iloc[::-1].reset_index(drop=True)  # first metric on top
    ys = [f"{r.metric} ({r.unit})" for r in t.itertuples()]
    fig = c.figure()
    xmax = 10.0
    # the diff's verdicts in its own order, then any the table holds beyond them
    verdicts = list(dict.fromkeys([*map(str, Verdict), *map(str, t["verdict"])]))
    for verdict in verdicts:
        color, label = COLORS.get(verdict, UNNAMED), f"{HEAD[-1]} {verdict}"
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
    # the compare section's own lines: whether the workloads match (no verdict where they
    # differ) and which run did not finish
    said = [diff.workload.text, unfinished_note(diff) or ""]
    note = "".join(
        f"<br><span style='font-size:10px;color:{c.NEUTRAL}'>{c.lines(x)}</span>" for x in said if x
    )
    c.style(
        fig,
        title,
        f"change from A to B (%; bars clipped at ±{CAP_PCT:.0f}%, labels give A → B){note}",
        "",
        height=160 + 38 * len(t) + 14 * note.count("<br>"),
    )
    fig.update_layout(barmode="overlay", margin={"l": 280, "r": 140})
    fig.update_yaxes(categoryorder="array", categoryarray=ys, automargin=True)
    fig.update_xaxes(zeroline=True, zerolinecolor="#444", range=[-xmax * 1.7, xmax * 1.7])
    return fig

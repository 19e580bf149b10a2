"""A split policy whose kernel cannot run a step's configuration (its record's note: "not
runnable: <why>") has no S for that reason, not an unknown one. The summary's splits row carries
the reason (``SplitStep.not_runnable``) and every view says it in the section's one wording
(``not_runnable_text``: "not runnable: <why>"), where the terminal said "‡" with a generic
legend, the dashboard "-", the sections and JSON "unknown" and the figure "not applicable: why".
Each test failed with its rule broken."""

from __future__ import annotations

import dataclasses
import html
import io
import re
from typing import Any

from rich.console import Console

from mlaprof.analysis.run_summary import RunSummary
from mlaprof.reporters.rows import NOT_RUNNABLE_MARK, split_cells, what_if_notes
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
NAME = "demo-bug-padding-collapses-splits-c16"  # two policies cannot run its batch / heads
WHY = {
    "aiter-gluon-fp8-v0.1.19": "fp8 bh16bn128 in v0.1.19 asserts B == 1, got B = 14",
    "aiter-gluon-bh64": "bh64 needs 64 or 128 heads, got 8",
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _said(s: RunSummary) -> list[str]:
    """The line each not-runnable row is said with: its policy, then the section's words."""
    return [f"{r.policy}: {r.not_runnable_text}" for r in s.splits if r.not_runnable]


def _terminal(s: Any) -> str:
    from mlaprof.reporters.terminal import TerminalRenderer

    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(TerminalRenderer().render(s))
    return _flat(out.getvalue())


def test_the_splits_rows_carry_why_a_policy_cannot_run() -> None:
    s = shipped_runs.summary(NAME)
    got = {r.policy: r.not_runnable for r in s.splits if r.not_runnable is not None}
    assert got == WHY
    for r in s.splits:
        if r.policy in WHY:
            assert r.used is None and r.deserved is None
            assert r.not_runnable_text == f"not runnable: {WHY[r.policy]}"
    # the report --json document keeps it, and reads back the same
    doc = s.to_json()
    assert {r["policy"]: r["not_runnable"] for r in doc["splits"] if "not_runnable" in r} == WHY
    assert RunSummary.from_json(doc).splits == s.splits


def test_every_view_says_it_in_the_sections_words() -> None:
    from mlaprof.figures.html_report import render_html
    from mlaprof.reporters.markdown import MarkdownRenderer
    from mlaprof.tui.once import snapshot

    s = shipped_runs.summary(NAME)
    said = _said(s)
    assert len(said) == 2
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
    md = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", MarkdownRenderer().render(s))
    views = {
        "terminal": _terminal(s),
        "markdown": _flat(md),
        "html": _flat(html.unescape(re.sub(r"<[^>]+>", " ", page))),
        "tui --once": _flat(snapshot(shipped_runs.run_dir(NAME))),
    }
    for view, text in views.items():
        for line in said:
            assert f"{NOT_RUNNABLE_MARK} {line}" in text, (view, line)
        assert "not applicable" not in text, view
    # the front splits tables say it under themselves, not only the sections at the end
    fronts = {
        "terminal": views["terminal"].split("findings (")[0],
        "tui --once": views["tui --once"].split("PADDING (")[0],
    }
    for view, text in fronts.items():
        for line in said:
            assert f"{NOT_RUNNABLE_MARK} {line}" in text, (view, line)


def test_the_splits_cells_mark_it_in_the_terminal_and_the_dashboard() -> None:
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import split_notes, split_table

    s = shipped_runs.summary(NAME)
    view, _ = read_view(shipped_runs.run_dir(NAME))
    view = dataclasses.replace(view, summary=s)
    head, rows = split_table(view)
    by_policy = {r[1]: r for r in rows}
    for pol in WHY:
        row = by_policy[pol]
        assert row[head.index("S used")] == row[head.index("deserved")] == NOT_RUNNABLE_MARK
    # then the what-if frozen S' line (tests/unit/test_frozen_what_if.py)
    assert split_notes(view) == [f"{NOT_RUNNABLE_MARK} {line}" for line in _said(s)] + [
        *what_if_notes(s.splits)
    ]
    # a runnable row keeps its number; a number it does not hold reads "-", never the mark
    runnable = next(r for r in s.splits if r.not_runnable is None and r.used is not None)
    assert split_cells(runnable).s == str(runnable.used)
    gap = dataclasses.replace(runnable, used=None)
    assert split_cells(gap).s == "-"


def test_the_figure_says_the_sections_words() -> None:
    from mlaprof.figures.splits import splits_used_vs_deserved

    s = shipped_runs.summary(NAME)
    fig = splits_used_vs_deserved(s, by="policy")
    notes = {a.x: a.text.replace("<br>", " ") for a in fig.layout.annotations}
    want = {r.policy: r.not_runnable_text for r in s.splits if r.not_runnable}
    assert notes == want

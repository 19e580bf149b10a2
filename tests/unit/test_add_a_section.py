"""Adding a section is a change in analysis only: a section type, the analyzer that fills it
and the summary field that holds it. Here all three live in this file (a section no view module
knows of, on a RunSummary subclass), and every view shows it, field by field, with no view
touched: the terminal report, ``--format md``, ``--json`` (read back to the same summary),
``--html`` and ``tui --once``, each through its own renderer function."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from dataclasses import dataclass

from mlaprof.analysis.run_summary import RunSummary
from mlaprof.reporters.rows import summary_blocks
from tests import shipped_runs
from tests.e2e.test_rows_in_every_view import expected, missing, norm

WORKER_GROUP = "shipped-runs"
RUN = "demo-bug-padding-collapses-splits-c16"


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One record of the new section's table."""

    rank: int
    waiting: int | None


@dataclass(frozen=True, slots=True)
class QueueWait:
    """The new section: plain values, an unknown, a table of records."""

    median_wait_us: float
    worst_rank: int | None
    provenance: str
    per_rank: list[QueueRow]


def queue_wait(s: RunSummary) -> QueueWait:
    """The new section's analyzer: reads the run's typed evidence (here the summary's ranks)
    and returns its section type; it formats nothing."""
    rows = [QueueRow(rank=r, waiting=None if r else 3) for r in s.ranks]
    return QueueWait(median_wait_us=12.5, worst_rank=None, provenance="measured on cpu",
                     per_rank=rows)  # fmt: skip


@dataclass(frozen=True, slots=True)
class WithQueue(RunSummary):
    """The summary with the new section: one field (None: the run does not hold it)."""

    queue_wait: QueueWait | None = None


def _extended() -> tuple[RunSummary, WithQueue]:
    s = shipped_runs.summary(RUN)
    base = {f.name: getattr(s, f.name) for f in dataclasses.fields(RunSummary)}
    return s, WithQueue(**base, queue_wait=queue_wait(s))


def _views(s: RunSummary, run: str = RUN) -> dict[str, str]:
    """The five views of ``s`` (the summary of the shipped input ``run``), each from its
    renderer function (what ``report`` and ``tui --once`` print), as a reader sees the text."""
    import io

    from rich.console import Console

    from mlaprof.figures.html_report import HtmlRenderer
    from mlaprof.reporters.markdown import MarkdownRenderer
    from mlaprof.reporters.renderer import JsonRenderer
    from mlaprof.reporters.terminal import TerminalRenderer
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    page = re.sub(r"<(script|style)\b.*?</\1>", " ", HtmlRenderer().render(s), flags=re.S)
    # the Markdown as a reader sees it: its backslash escapes (CommonMark 2.4) taken off
    md = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", MarkdownRenderer().render(s))
    view, _ = read_view(shipped_runs.run_dir(run))
    console = Console(file=io.StringIO(), width=200, color_system=None)
    return {
        "terminal": TerminalRenderer(console).render(s),
        "md": html.unescape(re.sub(r"</?(details|summary)>", " ", md)),
        "html": html.unescape(re.sub(r"<[^>]+>", " ", page)),
        "tui": render_text(dataclasses.replace(view, summary=s), width=200),
        "json": JsonRenderer().render(s),
    }


def test_a_new_section_shows_in_every_view_with_no_view_changed() -> None:
    s, wider = _extended()
    block = next(b for b in summary_blocks(wider) if b.key == "queue_wait")
    assert [(r.label, r.text) for r in block.rows] == [
        ("median wait", "12.5 µs"),
        ("worst rank", "unknown"),  # None: the evidence holds no value, never a 0
        ("provenance", "measured on cpu"),
    ]
    assert [t.head for t in block.tables] == [["rank", "waiting"]]
    want = expected(summary_blocks(wider))
    new = expected([block])
    views = _views(wider)
    for name, text in views.items():
        if name == "json":
            continue
        got = norm(text)
        assert missing(got, want) == [], name  # every row, in the rows layer's order
        assert missing(got, new) == [], name
    before = {k: norm(v) for k, v in _views(s).items() if k != "json"}
    assert all(missing(v, new) for v in before.values())  # not there before

    # the JSON document holds the section and reads back to the same summary and rows
    doc = json.loads(views["json"])
    assert doc["queue_wait"] == {
        "median_wait_us": 12.5,
        "worst_rank": None,
        "provenance": "measured on cpu",
        "per_rank": [{"rank": 0, "waiting": 3}],
    }
    back = WithQueue.from_json(doc)
    assert back.queue_wait == wider.queue_wait
    assert summary_blocks(back) == summary_blocks(wider)


def test_a_section_the_run_does_not_hold_is_named_absent() -> None:
    s, _ = _extended()
    base = {f.name: getattr(s, f.name) for f in dataclasses.fields(RunSummary)}
    none = WithQueue(**base, queue_wait=None)
    run = next(b for b in summary_blocks(none) if b.key == "run")
    absent = next(r.text for r in run.rows if r.key == "absent")
    assert "queue wait" in absent
    assert all(b.key != "queue_wait" for b in summary_blocks(none))

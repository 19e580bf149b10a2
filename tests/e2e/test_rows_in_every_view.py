"""Rows equal rows: every shipped run (the demo runs, read in place), every committed trace and
log under tests/data (imported into a temporary folder) and the recorded vLLM engine run,
rendered by the CLI through all five views (terminal, ``--format md``, ``--json``, ``--html``,
``tui --once``). Each row and table cell the rows layer (:mod:`mlaprof.reporters.rows`) defines
for the run's summary must read the same, in the same order, in each view; the JSON document,
read back, must give the same rows."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from mlaprof.analysis.run_summary import RunSummary
from mlaprof.reporters.rows import HEADING, Block, summary_blocks, table_more
from tests import shipped_runs
from tests.conftest import EACH_TEST
from tests.e2e.test_view_equals_view import views

WORKER_GROUP = EACH_TEST


def norm(text: str) -> str:
    """What a reader sees of a cell or a line, in every view alike: table rules, Markdown
    emphasis, escapes and ``label:`` colons dropped, whitespace as one space."""
    return " ".join(re.sub(r"[|*`\\:]", " ", text).split())


def readable(view: str, text: str) -> str:
    if view == "md":  # the <details> blocks' tags and the escapes inside them
        text = html.unescape(re.sub(r"</?(details|summary)>", " ", text))
    return norm(text)


def expected(blocks: list[Block]) -> list[str]:
    """The strings a view must show, in order: each block's title, rows, tables."""
    out: list[str] = []
    for b in blocks:
        out.append(b.title)
        out += [f"{r.label} {r.text}" for r in b.rows]
        for t in b.tables:
            if t.title != b.title:
                out.append(t.title)
            out.append(" ".join(t.head))
            out += [" ".join(r) for r in t.rows]
            out += t.notes  # a table's notes (the long sources of its rows), under it
            if t.more:
                out.append(table_more(t))
    return [norm(x) for x in out]


def missing(text: str, want: list[str]) -> list[str]:
    """The first wanted string not found in order after the sections heading (and the rest
    of the list from there: a view that leaves one out fails at that one)."""
    start = text.lower().find(norm(HEADING).lower())
    if start < 0:
        return ["the sections heading"]
    pos = start
    for i, w in enumerate(want):
        at = text.find(w, pos)
        if at < 0:
            return want[i : i + 3]
        pos = at + len(w)
    return []


@pytest.mark.parametrize("ident", shipped_runs.NAMES)
def test_every_row_reads_the_same_in_every_view(
    ident: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v = views(ident, tmp_path, capsys)
    doc = json.loads(v["json"])
    blocks = summary_blocks(RunSummary.from_json(doc))
    # the JSON document is the summary: read back, it gives the rows the in-memory one gives
    assert blocks == summary_blocks(shipped_runs.summary(ident))
    want = expected(blocks)
    assert len(want) > 10
    bad = {view: missing(readable(view, text), want) for view, text in v.items() if view != "json"}
    assert not any(bad.values()), (
        f"{ident}: rows a view does not show as the rows layer says: {bad}"
    )


def test_a_view_that_words_a_row_otherwise_fails(tmp_path: Path, capsys) -> None:
    """The read-back catches one value worded otherwise, and a row left out."""
    ident = "demo-bug-padding-collapses-splits-c16"
    v = views(ident, tmp_path, capsys)
    want = expected(summary_blocks(shipped_runs.summary(ident)))
    md = readable("md", v["md"])
    assert missing(md, want) == []
    row = next(w for w in want if w.startswith("padding fraction"))
    assert missing(md.replace(row, "padding fraction 7%"), want)[0] == row
    assert missing(md.replace(row, ""), want)[0] == row

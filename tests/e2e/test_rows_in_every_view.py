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


@pytest.mark.parametrize("ident", ["aiter-asm_16heads", "log-tp2_two_starts"])
def test_the_front_tables_say_where_their_numbers_come_from_in_every_view(
    ident: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The tables every view shows before the findings (rows.front_tables) carry their notes
    (a trace path's sources, a log's provenance) there too: the terminal, the HTML page and
    ``tui --once`` each show a front table's title, then its notes, before the sections."""
    from mlaprof.reporters.rows import front_tables

    monkeypatch.setenv("COLUMNS", "250")  # a note on one line in the terminal
    tables = front_tables(summary_blocks(shipped_runs.summary(ident)))
    want = [norm(x) for t in tables if t.notes for x in (t.title, *t.notes)]
    assert want, f"{ident}: no front table with notes"
    v = views(ident, tmp_path, capsys)
    bad = {}
    for view in ("text", "html", "tui"):
        bad[view] = missing(front_of(view, v[view]), want)
    assert not any(bad.values()), f"{ident}: front notes a view leaves out: {bad}"


def front_of(view: str, text: str) -> str:
    """What a view shows before its sections heading, as a reader sees it."""
    text = readable(view, text)
    end = text.lower().find(norm(HEADING).lower())
    assert end > 0, f"{view}: no sections heading"
    return norm(HEADING) + " " + text[:end]


@pytest.mark.parametrize(
    "ident",
    [
        "aiter-asm_mtp_drafter",
        "log-tp2_two_starts",
        "engine-engine_ngram_run",
        "aiter-fleet_dp2_tp4",
    ],
)
def test_the_front_rows_read_the_same_in_every_view(
    ident: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The rows every view says before the findings (rows.front_rows: an engine's counts, its
    shadow, a log's spec decoding, a trace's trust and replay time) show there, in order, in the
    terminal, the HTML page and ``tui --once`` (a block of one row says its text alone)."""
    from mlaprof.reporters.rows import front_rows

    monkeypatch.setenv("COLUMNS", "250")
    want: list[str] = []
    for b in front_rows(summary_blocks(shipped_runs.summary(ident))):
        want.append(norm(b.title))
        if len(b.rows) == 1:
            want.append(norm(b.rows[0].text))
        else:
            want += [norm(f"{r.label} {r.text}") for r in b.rows]
    assert len(want) > 2, f"{ident}: no front rows"
    v = views(ident, tmp_path, capsys)
    bad = {view: missing(front_of(view, v[view]), want) for view in ("text", "html", "tui")}
    assert not any(bad.values()), f"{ident}: front rows a view leaves out: {bad}"


# -- the diff: one diff -> rows function (mlaprof.reporters.diff_rows) in every compare view ----
PAIRS = [
    ("demo-bug-padding-collapses-splits-c16", "demo-fix-splits-decided-on-device-c1-long"),
    ("demo-bug-padding-collapses-splits-c16", "demo-fix-padding-active-rows-c16"),
    ("aiter-gluon_v0119_bug", "aiter-gluon_v0119_fix"),  # imported traces: S per variant
]


def compare_texts(a: str, b: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """``report A --compare B`` in the terminal, Markdown and HTML, and ``tui --once --compare``,
    each as a reader sees it (tags, escapes and table rules dropped)."""
    from mlaprof.cli import main

    da, db = str(shipped_runs.run_dir(a)), str(shipped_runs.run_dir(b))

    def out(*argv: str) -> str:
        capsys.readouterr()
        assert main(list(argv)) == 0
        return capsys.readouterr().out

    page = tmp / "c.html"
    out("report", da, "--compare", db, "--html", str(page))
    doc = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S)
    md = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", out("report", da, "--compare", db, "--format", "md"))
    texts = {
        "text": out("report", da, "--compare", db),
        "md": html.unescape(md),
        "html": html.unescape(re.sub(r"<[^>]+>", " ", doc)),
        "tui": out("tui", da, "--once", "--compare", db),
    }
    return {k: norm(re.sub("[│┃]", " ", v)) for k, v in texts.items()}  # rich table rules


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=["other-workload", "same-workload", "traces"])
def test_every_diff_row_reads_the_same_in_every_view(
    a: str, b: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from mlaprof.analysis.diff import diff
    from mlaprof.reporters.diff_rows import diff_block

    monkeypatch.setenv("COLUMNS", "600")  # a table row on one line in the terminal (routes
    # carry their provenance: two of them make a long row)
    block = diff_block(diff(shipped_runs.summary(a), shipped_runs.summary(b)))
    want = [norm(f"{r.label} {r.text}") for r in block.rows]
    want += [norm(" ".join(block.tables[0].head))]
    want += [norm(" ".join(row)) for row in block.tables[0].rows]
    assert want[0].startswith("workload") and len(want) > 8
    texts = compare_texts(a, b, tmp_path, capsys)
    bad = {view: [w for w in want if w not in text] for view, text in texts.items()}
    assert not any(bad.values()), f"{a} vs {b}: diff rows a view does not show: {bad}"

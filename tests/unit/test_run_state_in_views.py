"""Where the run stands reads the section's one line in every view, a finished run's too: a
run that finished and closed its record has ``state.text`` "finished; 32 steps committed,
last committed step 31" (it was empty, and the rows layer read it "state: none" in the terminal
report, the Markdown report, the HTML page and ``tui --once``); a view flags that line above its
report only for a run that did not close its record (``RunState.closed``). Each test failed
with its rule broken."""

from __future__ import annotations

import dataclasses
import html
import io
import re
import types
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from mlaprof.analysis.run_state import run_state
from mlaprof.figures.html_report import render_html
from mlaprof.reporters.markdown import render_markdown
from mlaprof.reporters.terminal import print_report
from mlaprof.store.liveness import RunStatus
from mlaprof.tui.text import section_lines
from tests import made_runs, shipped_runs

WORKER_GROUP = "shipped-runs"
# "state: none" (terminal, tui), "| state | none |" (Markdown), "state none" (the page's text)
STATE_NONE = re.compile(r"\bstate\b[\s:|]*none\b")
STEPS = pd.DataFrame({"rank": [0, 0, 0], "step": [0, 1, 2]})


def _flat(text: str) -> str:
    return " ".join(text.split())


def _views(s: Any, page: bool = True) -> dict[str, str]:
    """Each view's text (``page``: the HTML page's too, the costly one: it draws the figures)."""
    buf = io.StringIO()
    print_report(s, Console(file=buf, width=400, color_system=None), verbose=True)
    # the dashboard's sections read only the view's summary (mlaprof.tui.text.section_lines)
    tui = section_lines(types.SimpleNamespace(summary=s), width=400)  # type: ignore[arg-type]
    out = {
        "report": _flat(buf.getvalue()),
        "markdown": _flat(render_markdown(s)),
        "tui": _flat("\n".join(tui)),
    }
    if page:
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)
        out["html"] = _flat(html.unescape(re.sub(r"<[^>]+>", " ", text)))
    return out


def _says_its_state(s: Any, page: bool = False) -> None:
    text = s.state.text
    assert text, s.run  # never empty: a view would have nothing (or "none") to say
    assert text.startswith("finished; ") == s.state.closed, text
    for view, said in _views(s, page).items():
        assert not STATE_NONE.search(said), (s.run, view)
        assert _flat(text) in said, (s.run, view, text)


@pytest.mark.parametrize("name", made_runs.NAMES)
def test_a_run_mlaprof_makes_says_where_it_stands_in_every_view(name: str) -> None:
    _says_its_state(made_runs.summary(name))


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_a_shipped_run_says_where_it_stands_in_every_view(name: str) -> None:
    _says_its_state(shipped_runs.summary(name))


@pytest.mark.parametrize(
    "name", ["cpu-default", "demo-bug-padding-collapses-splits-c16", "kineto_graph_replay",
             "log-cpu_mla_serve", "engine-engine_ngram_run"],
)  # fmt: skip
def test_the_html_page_says_where_the_run_stands(name: str) -> None:
    runs = made_runs if name in made_runs.NAMES else shipped_runs
    _says_its_state(runs.summary(name), page=True)


def test_a_finished_run_says_finished_with_its_committed_steps() -> None:
    st = run_state("finished", None, STEPS, [0])
    assert st.closed and st.status is RunStatus.FINISHED
    assert st.text == "finished; 3 steps committed, last committed step 2"


@pytest.mark.parametrize(
    ("status", "reason", "begins"),
    [
        ("incomplete", None, "its writer stopped without finishing"),
        ("running", None, "still being written"),
        ("finished", "drained: SIGTERM", "finished (drained: SIGTERM)"),
    ],
)
def test_only_a_run_that_did_not_close_its_record_is_flagged_above_the_report(
    status: str, reason: str | None, begins: str
) -> None:
    base = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    assert base.state.closed
    flag = f"status: {base.state.status} ({base.state.text})"
    views = _views(base)
    assert flag not in views["report"] and f"_{base.state.text}_" not in views["markdown"]
    st = run_state(status, reason, STEPS, [0])
    assert not st.closed and st.text.startswith(begins), st.text
    assert st.text.endswith("; 3 steps committed, last committed step 2"), st.text
    s = dataclasses.replace(base, state=st)
    views = _views(s)
    assert f"status: {st.status} ({st.text})" in views["report"]
    assert f"_{st.text}_" in views["markdown"]
    for said in views.values():  # and the section says the same line
        assert st.text in said


def test_the_check_sees_state_none_in_each_views_layout() -> None:
    for said in ("state: none", "| state | none |", "state none"):
        assert STATE_NONE.search(_flat(said)), said
    assert not STATE_NONE.search("state: finished; no step committed")


def _state_rows(s: Any) -> tuple[dict[str, str], list[Any]]:
    from mlaprof.reporters.rows import summary_blocks

    (block,) = [b for b in summary_blocks(s) if b.key == "state"]
    return {r.key.removeprefix("state."): r.text for r in block.rows}, block.tables


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_the_state_line_says_each_field_it_is_made_of_once(name: str) -> None:
    """The sections said where a run stands five ways: "status: finished", "steps committed:
    32", "last step: 31", "committed: 32 steps, last step 31" and "state: finished; 32 steps
    committed, ...", then a table of the one rank's same two numbers. A field's row is left out
    where the state line holds its words, kept where it reads otherwise; nothing is lost."""
    from mlaprof.analysis.typed_json import holds_words
    from mlaprof.reporters.fmt import field_text

    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    rows, tables = _state_rows(s)
    line = rows["text"]
    for f in ("status", "reason", "steps_committed", "last_step", "committed"):
        v = getattr(s.state, f)
        words = s.state.none_reads(f) if v is None else field_text(f, v)
        if f in rows:  # kept: the line does not hold it
            assert not holds_words(line, rows[f]), (f, rows[f], line)
        elif v is not None:  # left out: the line says it
            assert holds_words(line, words), (f, words, line)
    if len(s.state.per_rank) == 1 and (s.fleet is None or len(s.fleet.per_rank) <= 1):
        assert not tables, [t.title for t in tables]  # the one rank's numbers are the line's


def test_ranks_that_differ_keep_their_rows_and_their_table() -> None:
    steps = pd.DataFrame({"rank": [0, 0, 0, 1], "step": [0, 1, 2, 0]})
    base = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    st = run_state("finished", None, steps, [0, 1])
    rows, tables = _state_rows(dataclasses.replace(base, state=st))
    assert rows["steps_committed"] == "differs per rank: see state", rows
    assert "committed" not in rows and "status" not in rows, rows  # both held by the line
    assert "1-3 steps per rank" in rows["text"], rows["text"]
    (table,) = tables
    assert [r[:3] for r in table.rows] == [["0", "3", "2"], ["1", "1", "0"]], table.rows


def test_a_one_rank_table_that_says_something_else_is_kept() -> None:
    """The one rank's table is left out only where the section says each of its values: a
    rank whose count the section does not hold keeps it (here made by hand)."""
    from mlaprof.analysis.sections import RankCommitted

    base = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    st = base.state
    other = RankCommitted(rank=0, steps_committed=st.steps_committed + 1, last_step=st.last_step)
    rows, tables = _state_rows(
        dataclasses.replace(base, state=dataclasses.replace(st, per_rank=[other]))
    )
    assert len(tables) == 1, tables
    _, tables = _state_rows(base)
    assert tables == [], tables


def test_a_one_rank_runs_timing_and_padding_say_the_rank_once() -> None:
    """A one-rank run's timing and padding blocks ended with a table of that rank's same
    numbers; a fleet's keep each rank's."""
    from mlaprof.reporters.rows import summary_blocks

    def tables(name: str) -> dict[str, list[Any]]:
        blocks = summary_blocks(shipped_runs.summary(name))
        return {b.key: b.tables for b in blocks if b.key in ("timing", "padding")}

    one = tables("demo-fix-padding-active-rows-c16")
    assert set(one) == {"timing", "padding"} and not any(one.values()), one
    (fleet,) = tables("aiter-fleet_dp2_tp4")["timing"]
    assert len(fleet.rows) == 8, fleet.rows

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

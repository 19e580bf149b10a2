"""A value not recorded reads so in every view ("not recorded", "unknown", ...), never as
Python's ``None``: over every kind of run the project produces (the runs mlaprof makes,
tests/made_runs.py, and the shipped runs, tests/shipped_runs.py), the terminal report (its
sections and ``--verbose`` tables included), the Markdown report and the HTML page."""

from __future__ import annotations

import html
import io
import re

import pytest
from rich.console import Console

from mlaprof.figures.html_report import render_html
from mlaprof.reporters.markdown import render_markdown
from mlaprof.reporters.terminal import print_report
from tests import made_runs, shipped_runs

WORKER_GROUP = "shipped-runs"
NONE = re.compile(r"\bNone\b")


def _views(s: object) -> dict[str, str]:
    buf = io.StringIO()
    print_report(s, Console(file=buf, width=100, color_system=None), verbose=True)  # type: ignore[arg-type]
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", render_html(s), flags=re.S)  # type: ignore[arg-type]
    return {
        "report": buf.getvalue(),
        "markdown": render_markdown(s),  # type: ignore[arg-type]
        "html": html.unescape(re.sub(r"<[^>]+>", " ", page)),  # what a reader sees
    }


def _nones(views: dict[str, str]) -> list[str]:
    return [
        f"{view}: ...{text[max(0, m.start() - 80) : m.end() + 40]}..."
        for view, text in views.items()
        for m in NONE.finditer(text)
    ]


@pytest.mark.parametrize("name", made_runs.NAMES)
def test_a_run_mlaprof_makes_never_shows_none(name: str) -> None:
    assert _nones(_views(made_runs.summary(name))) == [], name


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_a_shipped_run_never_shows_none(name: str) -> None:
    assert _nones(_views(shipped_runs.summary(name))) == [], name


def test_the_check_sees_a_none() -> None:
    assert _nones({"report": "occupancy of None units"}) != []


def test_a_sync_without_its_op_or_line_is_still_found_and_said_unrecorded() -> None:
    import pandas as pd

    from mlaprof.analysis.syncs import sync_findings

    syncs = pd.DataFrame(
        {"rank": [0, 0], "step": [0, 0], "layer": [0, 1], "kind": ["sync", "sync"],
         "op": [None, "aten.item"], "location": [None, "mla.py:3"], "detail": [None, "x"]}
    )  # fmt: skip
    found = {f.title: f for f in sync_findings(syncs, "FULL")}
    unknown = found[
        "device->host sync in the captured region: an unrecorded op at an unrecorded line"
    ]
    assert unknown.location is None and unknown.data["op"] is None
    assert not NONE.search(unknown.evidence) and unknown.data["layers"] == [0]
    assert (
        found["device->host sync in the captured region: aten.item at mla.py:3"].evidence.count(
            "; x"
        )
        == 1
    )

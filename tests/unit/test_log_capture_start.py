"""A vLLM log with several server starts: the capture line says which start it is of, in the
section's own text, so every view (terminal, Markdown, HTML, the dashboard, JSON) prints it
beside the earlier start's findings (it was the terminal's alone)."""

from __future__ import annotations

import pytest

from tests import shipped_runs
from tests.unit.test_add_a_section import _views

WORKER_GROUP = "shipped-runs"


@pytest.mark.parametrize(("name", "of"), [("log-tp2_two_starts", "2 of 2"),
                                          ("log-cpu_mla_serve", "1 of 1")])  # fmt: skip
def test_every_view_says_which_start_the_capture_line_is_of(name: str, of: str) -> None:
    s = shipped_runs.summary(name)
    words = f"at start {of}, as the log says"
    assert s.capture.text.endswith(words), s.capture.text
    for view, text in _views(s, name).items():
        assert words in " ".join(text.split()), view

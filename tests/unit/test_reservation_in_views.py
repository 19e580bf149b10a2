"""The modelled verify buffers are one section of the rows layer (rows.SPECS "Reservation",
rows.FRONT): the terminal, Markdown, HTML and ``tui`` show the same words, from one place, and
the terminal composes no line of its own."""

from __future__ import annotations

import inspect
import re

from mlaprof.reporters import terminal
from mlaprof.reporters.rows import front_tables, summary_blocks
from tests import shipped_runs
from tests.view_texts import every_view

NAME = "demo-bug-padding-collapses-splits-c16"  # a scenario run: its buffers are modelled


def test_every_view_says_the_verify_buffers_in_the_rows_layers_words() -> None:
    s = shipped_runs.summary(NAME)
    if not s.reservation:
        raise AssertionError("the demo run models no verify buffers")
    (t,) = [t for t in front_tables(summary_blocks(s)) if t.key == "reservation"]
    if t.head != ["path", "sized by", "bytes"] or len(t.rows) != len(s.reservation):
        raise AssertionError(t)
    # where each number comes from: the scenario it was modelled for and each formula's source
    said = " ".join(t.notes)
    for r in s.reservation:
        if r.provenance not in said or r.source not in said:
            raise AssertionError((r, t.notes))
    for view, text in every_view(shipped_runs.run_dir(NAME), s).items():
        text = re.sub(r"\\(.)", r"\1", text)  # Markdown's escapes (max\_model\_len)
        cells = re.sub(r"[|]", " ", text)
        for note in t.notes:
            if " ".join(note.split()) not in text:
                raise AssertionError((view, note))
        for row in t.rows:
            if " ".join(" ".join(row).split()) not in " ".join(cells.split()):
                raise AssertionError((view, row))
        if "verify buffers (modelled):" in text:  # the terminal's own line is gone
            raise AssertionError(view)


def test_the_terminal_holds_no_code_of_its_own_for_the_verify_buffers() -> None:
    src = inspect.getsource(terminal).lower()
    for word in ("reservation", "verify buffers", "sized_by"):
        if word in src:
            raise AssertionError(f"terminal.py lays out the verify buffers itself: {word!r}")

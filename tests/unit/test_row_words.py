"""A row of the sections says its label once and its value in its unit, in every view (the
rows layer serves the terminal, Markdown, HTML and the TUI alike): a fleet's line, labelled
"ranks", read "ranks: ranks: 1, all agree"; each mode's median step read "FULL shape on
cpu=69957.9" with no unit, beside "66751.7 µs" for the same median one row up."""

from __future__ import annotations

import re

import pytest

from mlaprof.reporters.rows import summary_blocks
from tests import made_runs, shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
FLEET = "aiter-fleet_dp2_tp4"  # 8 ranks: its line is "ranks: 8, ..."


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_no_row_repeats_its_label(name: str) -> None:
    s = shipped_runs.summary(name)
    twice = [(b.title, r.label, r.text[:60]) for b in summary_blocks(s) for r in b.rows
             if r.text.startswith(f"{r.label}: ")]  # fmt: skip
    assert not twice, twice


def test_the_fleet_line_is_said_once_in_every_view() -> None:
    s = shipped_runs.summary(FLEET)
    assert s.fleet.text.startswith("ranks: 8, ")  # the headline's line, as it is
    (row,) = [r for b in summary_blocks(s) for r in b.rows if r.key == "fleet.text"]
    assert row.label == "ranks" and row.text == s.fleet.text.removeprefix("ranks: ")
    for view, text in every_view(shipped_runs.run_dir(FLEET), s).items():
        assert "ranks: ranks:" not in text, view


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_each_modes_median_step_says_its_unit(name: str) -> None:
    s = shipped_runs.summary(name)
    if not s.timing.by_mode:
        pytest.skip("no step timed per mode")
    (row,) = [r for b in summary_blocks(s) if b.key == "timing" for r in b.rows
              if r.key == "timing.by_mode"]  # fmt: skip
    parts = row.text.split(", ")
    assert len(parts) == len(s.timing.by_mode) and all(p.endswith(" µs") for p in parts), row


@pytest.mark.parametrize("rank", [None, 0, 5])
def test_the_dashboard_text_says_the_median_step_once(rank: int | None) -> None:
    """``tui --once`` printed the headline's "median step" and then "step median (analysis)"
    with the same number; a rank picked of several keeps its own median, named by its rank."""
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    v, _ = read_view(shipped_runs.run_dir(FLEET), rank=rank)
    text = render_text(v, width=400)
    summary = text.split("SUMMARY", 1)[1].split("\n\n", 1)[0]  # the headline's block
    pooled = shipped_runs.summary(FLEET).timing.step_median_text
    assert summary.count(f"median step: {pooled}") == 1, summary
    own = [ln.strip() for ln in summary.splitlines() if ln.strip().startswith("step median")]
    if rank is None or v.step_median == pooled:
        assert own == [], own
    else:
        assert own == [f"step median (rank {rank} of 8): {v.step_median}"], own


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_a_headline_line_says_its_provenance_once(name: str) -> None:
    """A predicted capture (a CPU run's) read "... (would run FULL on a GPU: predicted from
    syncs; ...)  (predicted from syncs)" in the terminal and the dashboard; a provenance the
    value does not hold is still printed after it."""
    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    views = every_view(runs.run_dir(name), s)
    for h in s.headline:
        value, prov = " ".join(h.value.split()), " ".join(h.provenance.split())
        # held as whole words (the rule: "model" is no word of "modelled", said apart then)
        held = re.search(rf"(?<!\w){re.escape(prov)}(?!\w)", value) is not None
        if held:  # said once, in each view that prints a provenance after a value
            for view in ("terminal", "tui"):
                assert f"{value} ({prov})" not in views[view], (view, h.label, prov)
        else:  # the dashboard prints every headline row, each with its provenance
            assert f"{h.label}: {value} ({prov})" in views["tui"], (h.label, prov)


def test_a_provenance_is_held_by_the_value_as_whole_words() -> None:
    from mlaprof.analysis.sections import HeadlineRow

    held = HeadlineRow(label="capture", provenance="predicted from syncs",
                       value="FULL -> predicted-ok (would run FULL: predicted from syncs; ...)")  # fmt: skip
    assert held.provenance_after == ""
    # "model" is no word of "modelled": the value does not say where it came from
    assert (
        HeadlineRow(label="S", provenance="model", value="S modelled 4").provenance_after == "model"
    )

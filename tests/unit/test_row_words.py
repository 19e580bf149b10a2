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


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_the_dashboard_never_says_a_median_or_step_time_as_a_bare_dash(name: str) -> None:
    """A run with no step timed (a vLLM log's) printed "step median (ranks 0-1): -" and a
    latency row of dashes ("last -  p50 -  ..."); it says what the timing section gives its
    missing median (as the report's rows do), for the run and for each rank picked."""
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import NO_STEP_TIMES, render_text

    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    ranks = sorted({r.rank for r in s.timing.per_rank}) or [0]
    for rank in [None, *(ranks if len(ranks) > 1 else [])]:
        v, _ = read_view(runs.run_dir(name), rank=rank)
        head = render_text(v, width=400).split("\nLAYERS", 1)[0]
        assert not re.search(r": -\s*$", head, re.M), (rank, head)
        assert "last -" not in head, (rank, head)
        if s.timing.steps is None:
            assert v.step_median == s.timing.none_reads("step_median_text"), v.step_median
            assert f"step ms: {NO_STEP_TIMES}" in head, head


def _section_at(s: object, key: str) -> object | None:
    """The section a block's key names ("route", "trace.capture", "runs[0].capture")."""
    v: object | None = s
    for part in key.split("."):
        name, _, index = part.partition("[")
        v = getattr(v, name, None)
        if v is not None and index:
            v = v[int(index.rstrip("]"))]  # type: ignore[index]
    return v


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_a_line_made_of_fields_says_each_of_them_once(name: str) -> None:
    """The sections printed a line beside each field it is made of ("capture: FULL -> captured
    (runs FULL)" after "mode asked for: FULL" and "mode that ran: FULL"; the route's line after
    its path, kernel, reason, version and provenance; "ranks: 1" before "ranks: 1, all agree"):
    each field the line declares (``typed_json.says``) keeps its row only where the line does
    not hold its words, and a field left out is one the line says."""
    import dataclasses

    from mlaprof.analysis.typed_json import SAYS, holds_words
    from mlaprof.reporters.rows import _text, summary_blocks

    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    checked = 0
    for b in summary_blocks(s):
        sec = _section_at(s, b.key)
        if sec is None or not dataclasses.is_dataclass(sec):
            continue
        rows = {r.key.removeprefix(f"{b.key}."): r.text for r in b.rows}
        fields = {f.name: f for f in dataclasses.fields(sec)}
        for f in fields.values():
            if SAYS not in f.metadata or f.name not in rows:
                continue
            line = rows[f.name]
            for n in f.metadata[SAYS]:
                v = getattr(sec, n)
                if n in rows:
                    assert not holds_words(line, rows[n]), (b.key, n, rows[n], line)
                elif v is not None and not isinstance(v, (list, dict)):
                    words = _text(fields[n], v, sec)
                    assert holds_words(line, words), (b.key, n, words, line)
                    checked += 1
    if name.startswith("demo-"):  # a capture, a route and the state line of every demo run
        assert checked >= 5, checked

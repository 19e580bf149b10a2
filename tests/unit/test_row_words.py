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
    """A run with no step timed (a vLLM log's) printed "0 steps per rank (2 ranks)", "step
    median (ranks 0-1): -" and a latency row of dashes ("last -  p50 -  ..."); it says what the
    timing section gives its missing median (as the report's rows do), for the run and for each
    rank picked."""
    from mlaprof.analysis.sections import NO_TIMED_STEP
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import render_text

    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    ranks = sorted({r.rank for r in s.timing.per_rank}) or [0]
    for rank in [None, *(ranks if len(ranks) > 1 else [])]:
        v, _ = read_view(runs.run_dir(name), rank=rank)
        head = render_text(v, width=400).split("\nLAYERS", 1)[0]
        assert not re.search(r": -\s*$", head, re.M), (rank, head)
        assert "last -" not in head, (rank, head)
        # the header's count: "no steps recorded" (the timing's words), never "0 steps per
        # rank (2 ranks)" above "median step: no steps recorded"
        assert not re.search(r"(?<![\d-])0 steps\b", head.splitlines()[1]), head
        if s.timing.steps is None:
            assert v.step_median == s.timing.none_reads("step_median_text"), v.step_median
            assert f"step ms: {NO_TIMED_STEP}" in head, head


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


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_a_layers_unchecked_syncs_and_unjudged_collapse_read_the_same_in_every_view(
    name: str,
) -> None:
    """A trace's layer read "syncs -" and "collapsed -/10" on the dashboard where the report's
    table said "unknown" for both: a layer none of whose steps was watched reads "not checked",
    one with no S to judge a collapse by "not judged" (with why, where its section says it), the
    same words in the sections' table and on the dashboard."""
    from mlaprof.analysis.sections import LAYER_NOT_CHECKED, LAYER_NOT_JUDGED
    from mlaprof.reporters.rows import summary_blocks
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import layer_table

    runs = made_runs if name in made_runs.NAMES else shipped_runs
    s = runs.summary(name)
    if not s.layers:
        pytest.skip("no layer records")
    (table,) = [t for b in summary_blocks(s) for t in b.tables if t.key == "layers"]
    col = {h: i for i, h in enumerate(table.head)}
    said = {(c[col["rank"]], c[col["layer"]]): (c[col["syncs"]], c[col["collapsed"]])
            for c in table.rows}  # fmt: skip
    for r in s.layers:
        if (str(r.rank), str(r.layer)) not in said:
            continue  # past the table's first rows
        syncs, collapsed = said[(str(r.rank), str(r.layer))]
        assert r.syncs is not None or syncs == LAYER_NOT_CHECKED, syncs
        assert r.collapsed is not None or collapsed.startswith(LAYER_NOT_JUDGED), collapsed
    v, _ = read_view(runs.run_dir(name))
    head, rows = layer_table(v)
    at = {h: i for i, h in enumerate(head)}
    shown = 0
    for r, cells in zip(v.layers, rows, strict=True):
        own = said.get((str(r.rank), str(r.layer)))
        if own is None:
            continue
        shown += 1
        assert cells[at["syncs"]] == own[0] or (r.syncs is not None and float(own[0]) == r.syncs)
        if r.collapsed is None:
            assert cells[at["collapsed"]] == own[1], (cells, own)
        else:
            assert cells[at["collapsed"]] == f"{r.collapsed}/{r.steps}", cells
    assert shown, "no layer of the table on the dashboard"


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_a_reason_a_policy_cannot_run_is_said_once_for_the_policies_it_stops(name: str) -> None:
    """A CUDA run listed "not runnable: mla_gluon asserts gfx950 (...)" six times, once per
    Gluon policy, under each splits table: the policies that share a reason are named on one
    line; every policy with no S is still named, once, in row order."""
    from mlaprof.analysis.sections import no_s_text
    from mlaprof.reporters.rows import not_runnable_notes

    s = (made_runs if name in made_runs.NAMES else shipped_runs).summary(name)
    lines = not_runnable_notes(s.splits)
    split = [ln[2:].split(": ", 1) for ln in lines]  # "<mark> <policies>: <why>"
    whys = [why for _, why in split]
    assert len(set(whys)) == len(whys), lines  # a reason on one line
    named = [p for pols, _ in split for p in pols.split(", ")]
    no_s = list(dict.fromkeys(r.policy for r in s.splits if no_s_text(r) is not None))
    assert sorted(named) == sorted(no_s), (named, no_s)  # each once, none left out
    for pols, why in split:
        for p in pols.split(", "):  # on the line of its own reason
            assert any(r.policy == p and no_s_text(r) == why for r in s.splits), (p, why)


def test_the_cuda_demo_says_its_two_not_runnable_reasons_once_each() -> None:
    from mlaprof.reporters.rows import not_runnable_notes

    s = shipped_runs.summary("demo-fix-splits-decided-on-device-c1-long")
    lines = not_runnable_notes(s.splits)
    assert len(lines) == 2 and lines[0].startswith("‡ aiter-gluon-v0.1.19, "), lines
    assert "aiter-asm, aiter-asm-fp8, aiter-asm-persistent: not runnable" in lines[1], lines


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_no_row_prints_a_map_of_maps_raw(name: str) -> None:
    """A trace's head counts per path read "heads: aiter-gluon=8=48" (path -> heads ->
    stage-2 kernels, printed as one run of "="): they read "aiter-gluon: 8 heads in 48 stage-2
    kernels"; no row of any run prints a map of maps that way."""
    from mlaprof.reporters.rows import block_lines

    s = (made_runs if name in made_runs.NAMES else shipped_runs).summary(name)
    raw = [ln for ln in block_lines(summary_blocks(s), 1000) if re.search(r"[\w.-]+=[\w.-]+=", ln)]
    assert not raw, raw
    heads = s.trace.checks.heads if s.trace is not None and s.trace.checks is not None else None
    if heads:
        (row,) = [r for b in summary_blocks(s) for r in b.rows if r.key.endswith("checks.heads")]
        for path, by in heads.items():
            for h, n in by.items():
                assert f"{path}: " in row.text and f"{h} heads in {n} stage-2 kernel" in row.text

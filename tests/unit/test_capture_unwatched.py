"""A FULL scenario run whose sync probe was off predicts no capture: its capture reads unknown
in the one word the sync count uses ("not checked"), not "no sync seen", and the S frozen into
the FULL graph is said only on the condition that the graph captures. With the probe on, the
same run's syncs predict the failure (the legacy flat path syncs on every layer)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.contradictions import contradictions
from mlaprof.analysis.run_summary import build_summary
from mlaprof.scenario import Scenario


def _summary(tmp_path: Path, check: str):
    sc = dataclasses.replace(Scenario(), layers=2, steps=2).validate()  # kv lens that collapse S
    writer = cpu_runner.start_run(sc, "legacy-flat", "cpu", tmp_path, name=check, threads=1)
    cpu_runner.run_cpu(sc, "legacy-flat", writer, check_syncs=check)
    writer.finish()
    with mlaprof.load(tmp_path / check) as run:
        return build_summary(run)


@pytest.mark.parametrize("check", ["off", "all"])
def test_the_capture_verdict_reads_the_syncs_the_probe_watched(tmp_path: Path, check: str) -> None:
    s = _summary(tmp_path, check)
    assert s.scenario.graph_mode == "FULL"
    assert contradictions(s) == []
    frozen = [f for f in s.findings if f.kind == "split-frozen"]
    if check == "off":
        assert not s.sync_counts.checked
        assert s.capture.status == "unknown" and s.capture.provenance == "not checked"
        assert "no step watched for syncs" in s.capture.text, s.capture.text
        assert frozen and all("if it captures" in f.title for f in frozen), frozen
    else:
        assert s.sync_counts.checked and s.sync_counts.total > 0
        # the fallback is a prediction; what ran is the CPU's eager steps (the timing's rule)
        assert s.capture.status == "predicted-fail" and s.capture.predicted_mode == "PIECEWISE"
        assert s.capture.effective_mode == "FULL shape on cpu"
        assert frozen == []  # no FULL graph serves the steps: nothing is frozen


def test_a_cpu_runs_step_times_say_the_shape_they_ran_not_a_graph(tmp_path: Path) -> None:
    """The CPU captures nothing: its steps' times are keyed by the mode whose shape they ran
    eagerly ("FULL shape on cpu"), the capture's mode that ran by the same rule beside the
    PIECEWISE a GPU would run (predicted), and no FULL-vs-fallback ratio is made of CPU steps."""
    s = _summary(tmp_path, "all")
    assert s.capture.effective_mode == "FULL shape on cpu" == next(iter(s.timing.by_mode))
    assert s.capture.predicted_mode == "PIECEWISE"
    assert set(s.timing.by_mode) == {"FULL shape on cpu"}, s.timing.by_mode
    assert not [f for f in s.findings if f.kind == "timing"]
    assert s.series is not None
    assert {m.mode for r in s.series.ranks for m in r.modes} == {"FULL shape on cpu"}
    # the step timeline's steps too (its legend read "step, FULL graph")
    timelines = [r.timeline for r in s.series.ranks if r.timeline is not None]
    assert timelines and {
        b.series for t in timelines for b in t.bars if b.series.startswith("step:")
    } == {"step:FULL shape on cpu"}


def test_a_frozen_s_nothing_decided_reads_conditional_in_every_view(tmp_path: Path) -> None:
    """The splits table's "frozen" cell of a run whose capture nothing decided says the same
    as the warning beside it ("if it captures"), never a bare number reading as a fact: the
    typed rows (``frozen_if``), the table cell every view lays out, the headline, the
    full_graph_splits section, the compare row's source and the figures' frozen series."""
    from dataclasses import replace

    from mlaprof.analysis.diff import diff
    from mlaprof.analysis.sections import FROZEN_IF_CAPTURES
    from mlaprof.figures.splits import splits_used_vs_deserved
    from mlaprof.reporters.renderer import renderer
    from mlaprof.reporters.rows import split_cells

    s = _summary(tmp_path, "off")
    assert s.capture.status == "unknown" and FROZEN_IF_CAPTURES == "if it captures"
    own = next(r for r in s.splits if r.policy == s.scenario.policy)
    assert own.frozen == 1 and own.frozen_if == FROZEN_IF_CAPTURES
    assert split_cells(own).frozen == "1 if it captures"
    (warning,) = [f for f in s.findings if f.kind == "split-frozen"]
    assert f", {FROZEN_IF_CAPTURES} (this run does not say)" in warning.title
    # every frozen S the table shows holds on the same condition
    assert all(r.frozen_if == FROZEN_IF_CAPTURES for r in s.splits if r.frozen is not None)
    text = renderer("text").render(s)
    assert "1 if it captures" in text and "'if it captures'" in text  # the cell and its legend
    md = renderer("md").render(s)
    assert "1 if it captures" in md
    g = s.full_graph_splits
    assert g.modelled == 1 and g.modelled_if == FROZEN_IF_CAPTURES
    d = diff(s, s).to_json()
    (row,) = [r for r in d["table"] if r["metric"].startswith("S a FULL graph replays")]
    assert FROZEN_IF_CAPTURES in row["provenance"], row
    assert s.series is not None and s.series.ranks[0].frozen_if == FROZEN_IF_CAPTURES
    fig = splits_used_vs_deserved(s)
    names = [t.name for t in fig.data if "frozen" in (t.name or "")]
    assert names and all(f"({FROZEN_IF_CAPTURES})" in n for n in names), names
    # the property every shipped run is held to fires on a bare frozen S beside that warning
    bare = replace(s, splits=[replace(r, frozen_if=None) for r in s.splits])
    assert any("said as a fact" in c for c in contradictions(bare))

    # a run whose capture is decided says its frozen S plainly (or none where none stands)
    watched = _summary(tmp_path, "all")
    assert all(r.frozen is None and r.frozen_if is None for r in watched.splits)
    assert watched.full_graph_splits.modelled_if is None

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
        assert s.capture.status == "predicted-fail" and s.capture.effective_mode == "PIECEWISE"
        assert frozen == []  # no FULL graph serves the steps: nothing is frozen


def test_a_cpu_runs_step_times_say_the_shape_they_ran_not_a_graph(tmp_path: Path) -> None:
    """The CPU captures nothing: its steps' times are keyed by the mode whose shape they ran
    eagerly ("FULL shape on cpu"), so the timing never reads "FULL" beside a capture that
    predicts the engine runs PIECEWISE, and no FULL-vs-fallback ratio is made of CPU steps."""
    s = _summary(tmp_path, "all")
    assert s.capture.effective_mode == "PIECEWISE"
    assert set(s.timing.by_mode) == {"FULL shape on cpu"}, s.timing.by_mode
    assert not [f for f in s.findings if f.kind == "timing"]
    assert s.series is not None
    assert {m.mode for r in s.series.ranks for m in r.modes} == {"FULL shape on cpu"}
    # the step timeline's steps too (its legend read "step, FULL graph")
    timelines = [r.timeline for r in s.series.ranks if r.timeline is not None]
    assert timelines and {
        b.series for t in timelines for b in t.bars if b.series.startswith("step:")
    } == {"step:FULL shape on cpu"}

"""The line under an empty findings list says OK only on what was judged: where S (no split
rule for the trace's kernel), the padding (not recorded; a trace's OK, which names only its S
and kernels, says it beside the OK instead), the syncs (none watched) or the capture could not
be judged, it reads "UNKNOWN", naming what was not judged and why, then what was; never "look as
expected" over an unjudged S. Checked for every basis (a scenario's splits,
an imported trace's paths, an engine's modelled batches) and in every view."""

from __future__ import annotations

import dataclasses
import re

import pytest

from mlaprof.analysis.capture_status import CaptureStatus
from mlaprof.analysis.findings_verdict import (
    ENGINE_BATCHES,
    SPLITS_AS_DESERVED,
    TRACE_AS_EXPECTED,
    findings_verdict,
)
from tests import shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"

TRACE = "kineto_graph_replay"  # a trace of mlaprof's Triton kernel: no split rule knows it


def test_an_imported_trace_with_an_unjudged_s_never_reads_as_expected() -> None:
    s = shipped_runs.summary(TRACE)
    assert s.findings == [] and s.trace is not None
    assert [c.status for c in s.trace.coverage.collapse_checks] == ["not checked"]
    fv = s.findings_verdict
    assert (fv.verdict, fv.label) == ("unknown", "UNKNOWN") and fv.line is not None
    for view, said in every_view(shipped_runs.run_dir(TRACE), s, with_json=True).items():
        text = said.replace("\\_", "_")  # Markdown's escaped underscores
        assert "look as expected" not in text and not re.search(r"\bOK\b", text), view
        assert "S not judged (on mlaprof-triton (mla_verify_stage1): no split rule" in text, view
        assert "padding not judged (not recorded)" in text, view
        assert "judged with nothing found: trace trust, capture, syncs" in text, view


def _ok_scenario() -> object:
    s = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    fv = findings_verdict([], s.splits, s.trace, s.shadow, s.capture, s.padding, s.sync_counts)
    assert fv.line == f"no findings: {SPLITS_AS_DESERVED}", fv.line
    return s


def _line(s: object, **changed: object) -> str:
    s = dataclasses.replace(s, **changed)  # type: ignore[type-var]
    fv = findings_verdict([], s.splits, s.trace, s.shadow, s.capture, s.padding, s.sync_counts)
    assert (fv.verdict, fv.label) == ("unknown", "UNKNOWN") and fv.line is not None
    assert SPLITS_AS_DESERVED not in fv.line and TRACE_AS_EXPECTED not in fv.line
    return fv.line


def test_each_unjudged_check_of_a_scenario_is_named() -> None:
    s = _ok_scenario()
    no_pad = dataclasses.replace(
        s.padding, **{f: None for f in ("steps", "real_rows", "padding_rows")}, text="not recorded"
    )
    assert "padding not judged (not recorded)" in _line(s, padding=no_pad)
    # no step watched and no capture that says the region held none: the syncs are unjudged
    failed = dataclasses.replace(s.capture, status=CaptureStatus.FAILED)
    line = _line(s, capture=failed)
    assert "syncs not judged (not checked (no step of this run was watched" in line, line
    no_s = [dataclasses.replace(r, used=None, deserved=None, on_device=False) for r in s.splits]
    assert "S not judged (no policy row holds an S used and deserved)" in _line(s, splits=no_s)


def test_a_trace_reads_ok_on_its_s_and_says_its_padding_was_not_judged() -> None:
    """A trace's OK names S and its kernels; no trace format records which rows are padding,
    so its unrecorded padding is said beside the OK as not judged, never folded into it."""
    s = shipped_runs.summary(TRACE)
    checks = [dataclasses.replace(c, status="checked") for c in s.trace.coverage.collapse_checks]
    cov = dataclasses.replace(s.trace.coverage, collapse_checks=checks)
    trace = dataclasses.replace(s.trace, coverage=cov)
    pad = shipped_runs.summary("demo-fix-padding-active-rows-c16").padding
    fv = findings_verdict([], [], trace, None, s.capture, pad, s.sync_counts)
    assert (fv.verdict, fv.line) == ("ok", f"no findings: {TRACE_AS_EXPECTED}")
    fv = findings_verdict([], [], trace, None, s.capture, s.padding, s.sync_counts)
    assert fv.verdict == "ok", fv.line
    assert fv.line == f"no findings: {TRACE_AS_EXPECTED}; not judged: padding (not recorded)"


@pytest.mark.parametrize("watched", [False, True])
def test_an_engines_batches_read_ok_only_with_its_syncs_judged(watched: bool) -> None:
    s = shipped_runs.summary("engine-engine_ngram_run")
    assert s.shadow is not None and s.shadow.per_step and not s.sync_counts.checked
    counts = dataclasses.replace(s.sync_counts, checked=watched)
    fv = findings_verdict([], [], None, s.shadow, s.capture, s.padding, counts)
    if watched:
        assert (fv.verdict, fv.line) == ("ok", f"no findings: {ENGINE_BATCHES}")
    else:
        assert fv.verdict == "unknown" and "syncs not judged" in (fv.line or ""), fv.line

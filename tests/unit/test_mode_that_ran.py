"""The capture section's "mode that ran" says what the steps did, a prediction says it is one:

1. a CPU scenario run captured nothing and replayed nothing: its steps ran eagerly in the asked
   mode's shape. The capture section said "mode that ran: PIECEWISE" (the fallback the syncs
   predict) or "FULL" (the mode asked for) beside "captured: none (CPU engine ...)", while the
   timing said "FULL shape on cpu". The mode that ran is the timing's one rule
   (:func:`mlaprof.analysis.timing.step_modes`); what a GPU would run is ``predicted_mode``,
   said as a prediction in the capture line and the capture finding;
2. an imported trace whose replays a graph-launch call confirms said "mode that ran: unknown"
   beside its own evidence "(FULL; 3 of 3 ...)": the mode is known where the trace confirms it.

Each test failed with its rule broken. Runs are made in temporary folders."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import mlaprof
from mlaprof import cpu_runner
from mlaprof.analysis.capture import _trace_ran
from mlaprof.analysis.run_summary import build_summary
from mlaprof.analysis.typed_json import to_json
from mlaprof.scenario import Scenario
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def _run(tmp: Path, name: str, backend: str, **kw: Any) -> Any:
    sc = dataclasses.replace(Scenario(), kv_lens=[70, 130, 200], layers=1, steps=2, **kw)
    writer = cpu_runner.start_run(sc.validate(), backend, "cpu", tmp, name=name, threads=1)
    cpu_runner.run_cpu(sc, backend, writer)
    writer.finish()
    with mlaprof.load(tmp / name) as run:
        return build_summary(run)


@pytest.mark.parametrize(
    ("backend", "mode", "status", "predicted"),
    [
        ("legacy-flat", "FULL", "predicted-fail", "PIECEWISE"),  # syncs: capture would fail
        ("torch", "FULL", "predicted-ok", "FULL"),
        ("torch", "PIECEWISE", "not-attempted", None),  # nothing predicted: PIECEWISE asked
    ],
)
def test_a_cpu_runs_mode_that_ran_is_what_its_steps_did(
    tmp_path: Path, backend: str, mode: str, status: str, predicted: str | None
) -> None:
    s = _run(tmp_path, "cpu", backend, graph_mode=mode)
    cap = s.capture
    assert str(cap.status) == status, cap
    # one rule for the capture's mode that ran and the timing's per-mode key
    assert list(s.timing.by_mode) == [f"{mode} shape on cpu"], s.timing.by_mode
    assert cap.effective_mode == f"{mode} shape on cpu", cap.effective_mode
    assert to_json(cap)["effective_mode"] == cap.effective_mode  # the JSON document's too
    assert cap.predicted_mode == predicted
    if predicted is not None:
        # the prediction reads as one, never as the mode that ran
        assert f"would run {predicted} on a GPU: predicted from syncs" in cap.text, cap.text
        assert f"(runs {predicted})" not in cap.text, cap.text
        assert f"ran {mode} shape on cpu" in cap.text, cap.text
    for f in s.findings:
        assert "the engine runs" not in f.title, f.title  # a CPU ran no fallback
    if status == "predicted-fail":
        (f,) = [f for f in s.findings if f.kind == "capture"]
        assert "the engine would run PIECEWISE" in f.title, f.title
    if status == "predicted-ok":
        # the prediction still serves the modelled FULL graph its frozen S is warned of
        assert cap.served_mode == "FULL"
        assert any(f.kind == "split-frozen" for f in s.findings), [f.kind for f in s.findings]


def test_an_imported_traces_confirmed_replays_say_the_mode_that_ran() -> None:
    s = shipped_runs.summary("kineto_graph_replay")
    cap = s.capture
    assert "(FULL; 3 of 3" in (cap.evidence or ""), cap.evidence
    assert cap.effective_mode == "FULL" and cap.ran_text == "FULL", cap
    # the trace's own counts decide: FULL only where a graph-launch call confirms the replays
    assert _trace_ran(3, 0, 0, confirmed=True) == "FULL"
    assert _trace_ran(3, 0, 0, confirmed=False) is None  # a replay could be a piece
    assert _trace_ran(0, 0, 4, confirmed=False) == "NONE"
    assert _trace_ran(0, 2, 0, confirmed=False) == "PIECEWISE"
    assert _trace_ran(3, 0, 2, confirmed=True) == "FULL in 3 steps, NONE in 2 steps"
    assert _trace_ran(3, 0, 2, confirmed=False) is None
    assert _trace_ran(0, 0, 0, confirmed=True) is None

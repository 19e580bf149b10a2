"""A failed FULL capture's memory row is the attempt's: its time, no bytes measured (the attempt
runs in a probe process and keeps no graph). The GPU runner writes it so ("FULL+attempt", bytes
None); runs recorded before held a PIECEWISE row of three zeros in its place, which every analyzer
reads as the attempt (mlaprof.analysis.capture_attempts), never as "0 B" measured. One finding,
one unknown capture memory in every view (the dashboard's included)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

from mlaprof.analysis.capture_attempts import as_attempt, failed_sizes
from mlaprof.gpu.capture_runner import _record_failed_capture
from mlaprof.gpu.offender import CaptureOutcome
from mlaprof.recording import ATTEMPT
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
FAILED = "demo-bug-legacy-flat-syncs-break-capture"  # a real H200 run, recorded before the change


def _row(mode: str, b: int | None, size: int = 16) -> dict:
    return {"rank": 0, "capture_size": size, "graph_mode": mode, "pool_bytes": b,
            "allocator_bytes": b, "driver_bytes": b, "capture_ns": 28_300_000}  # fmt: skip


def test_the_old_placeholder_reads_as_the_attempt_and_nothing_else_does() -> None:
    failed = failed_sizes([{"rank": 0, "capture_size": 16, "graph_mode": "FULL",
                            "status": "failed", "fallback": "PIECEWISE"}])  # fmt: skip
    read = as_attempt(_row("PIECEWISE", 0), failed)
    assert read["graph_mode"] == "FULL" + ATTEMPT
    assert read["pool_bytes"] is read["allocator_bytes"] is read["driver_bytes"] is None
    assert read["capture_ns"] == 28_300_000
    # a measured PIECEWISE graph, another size's row, another rank's: as recorded
    for row in (
        _row("PIECEWISE", 4096),
        _row("PIECEWISE", 0, size=8),
        {**_row("PIECEWISE", 0), "rank": 1},
    ):
        assert as_attempt(row, failed) == row


def test_the_runner_writes_the_attempt_with_no_bytes() -> None:
    rows: list[tuple[str, dict]] = []
    writer = SimpleNamespace(
        transaction=contextlib.nullcontext, add=lambda table, **r: rows.append((table, r))
    )
    sess = SimpleNamespace(groups={4: SimpleNamespace(capture_size=4)})
    outcome = CaptureOutcome("failed", layer=0, op="aten.item", location="a.py:1",
                             message="capture failed", capture_ns=5_000_000)  # fmt: skip
    _record_failed_capture(writer, sess, outcome)
    (mem,) = [r for t, r in rows if t == "memory"]
    assert mem["graph_mode"] == "FULL" + ATTEMPT and mem["capture_ns"] == 5_000_000
    assert mem["pool_bytes"] is mem["allocator_bytes"] is mem["driver_bytes"] is None
    (cap,) = [r for t, r in rows if t == "captures"]
    assert cap["status"] == "failed" and cap["fallback"] == "PIECEWISE"


def test_a_failed_capture_reports_no_measured_memory_in_any_view() -> None:
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import capture_panel

    s = shipped_runs.summary(FAILED)
    assert s.capture.status == "failed" and s.capture.memory_bytes is None
    (f,) = [f for f in s.findings if f.kind == "memory"]
    assert f.title.startswith("failed capture attempt:") and "unknown" in f.title
    assert "0 B" not in f.title + f.evidence and "28.3 ms" in f.evidence
    view, _ = read_view(shipped_runs.run_dir(FAILED))
    _, lines = capture_panel(view)  # the capture section, as the report says it
    assert "capture memory: unknown" in lines and "status: failed" in lines
    assert not [x for x in lines if "0 B" in x or "MiB" in x], lines


def test_the_dashboard_never_shows_the_timing_twin_as_a_capture() -> None:
    """The instrumented timing twin's memory row is no serving graph (the summary's capture
    memory leaves it out): the dashboard's capture panel, the report's capture section, counts
    the one serving graph and never names the twin."""
    from mlaprof.tui.once import read_view
    from mlaprof.tui.text import capture_panel

    name = "demo-fix-native-kernel-full-graph"
    s = shipped_runs.summary(name)
    view, _ = read_view(shipped_runs.run_dir(name))
    _, lines = capture_panel(view)
    assert s.capture.sizes == 1 and "capture sizes covered (captured or attempted): 1" in lines
    assert not [x for x in lines if "+events" in x], lines

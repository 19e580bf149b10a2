"""The dashboard's capture panel is the report's capture section: the same rows, labels and
values (the rows layer's ``capture`` block), on a CPU run (no capture: the size the steps were
padded to and that none was captured, never the captures table's "not-attempted" row), a GPU run
that captured and one whose capture failed, and an imported trace. Runs are made in, or copied
to, temporary folders."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from mlaprof.tui.once import read_view
from mlaprof.tui.text import capture_panel, render_text
from tests import made_runs, shipped_runs

WORKER_GROUP = "shipped-runs"

RUNS = {
    "cpu": lambda: made_runs.run_dir("cpu-default"),
    "cpu-legacy": lambda: made_runs.run_dir("cpu-legacy-flat"),
    "gpu-captured": lambda: shipped_runs.run_dir("demo-fix-native-kernel-full-graph"),
    "gpu-failed": lambda: shipped_runs.run_dir("demo-bug-legacy-flat-syncs-break-capture"),
    "trace": lambda: shipped_runs.run_dir("aiter-gluon_v0119_bug"),
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _terminal(s: object) -> str:
    from mlaprof.reporters.terminal import TerminalRenderer

    console = Console(file=io.StringIO(), width=400, color_system=None)
    return _flat(TerminalRenderer(console).render(s))


@pytest.mark.parametrize("kind", RUNS)
def test_the_tui_capture_panel_says_what_the_report_says(kind: str) -> None:
    run_dir: Path = RUNS[kind]()
    view, _ = read_view(run_dir)
    s = view.summary
    assert s is not None
    title, lines = capture_panel(view)
    said = _flat(" ".join([title, *lines]))
    # the report's capture section, word for word (its title, then each labelled value)
    assert said in _terminal(s), (kind, said)
    assert f"capture: {s.capture.text}" in lines and f"status: {s.capture.status}" in lines
    if s.capture.sizes_text is not None:
        assert _flat(f"capture sizes: {s.capture.sizes_text}") in said
    once = _flat(render_text(view, width=400))
    assert _flat(f"{title.upper()} " + " ".join(lines)) in once, kind
    if str(s.device) == "cpu":  # no capture on a CPU: the section's words, no recorded status
        assert "captured: none (CPU engine" in said and "not-attempted" not in said

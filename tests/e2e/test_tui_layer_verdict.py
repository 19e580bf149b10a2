"""The layer drill-down's sync verdict is the analysis' (mlaprof.analysis.step_syncs.
layer_verdict), drawn in the TUI: a layer no step of which was watched reads "not checked"
(never the green "no syncs" an empty site list once gave), a layer whose syncs an imported
trace's API trace counted reads them found with its sites unknown, and the dashboard's per-step
layer table of that trace reads the same counts as its summary."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Static

from mlaprof.store import create_run
from mlaprof.tui.app import MlaprofApp
from mlaprof.tui.screens.dashboard import DashboardScreen
from mlaprof.tui.screens.layer import LayerScreen
from tests import shipped_runs


async def _until(pilot: Pilot, cond: object) -> None:
    for _ in range(12_000):  # a guard against a hang: the wait is for the event
        if cond():  # type: ignore[operator]
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not met (a hang)")


def _analysed(app: MlaprofApp) -> bool:
    s = app.screen
    return (
        isinstance(s, DashboardScreen)
        and s.view is not None
        and s.view.findings_source == "mlaprof.analysis"
    )


async def _verdict(pilot: Pilot, layer: int) -> tuple[str, str]:
    """The drill-down of ``layer``: its summary text and the style of its verdict line."""
    app = pilot.app
    app.screen.open_layer(layer)
    await _until(pilot, lambda: isinstance(app.screen, LayerScreen))
    await pilot.pause(0.1)
    text = app.screen.query_one("#layer-summary", Static).content
    assert isinstance(text, Text)
    last = text.plain.rstrip("\n").rsplit("\n", 1)[-1]
    start = text.plain.rindex(last)
    styles = {str(s.style) for s in text.spans if s.start <= start < s.end}
    return text.plain, " ".join(sorted(styles))


def _unwatched_run(traces: Path) -> Path:
    """A run whose sync probe was off (``--check-syncs off``): layers recorded, syncs None."""
    w = create_run(traces, "nosync", {"kind": "scenario", "device": "cpu",
                                      "scenario": {"name": "nosync"}})  # fmt: skip
    with w.transaction():
        for step in (0, 1):
            w.add("steps", step=step, t_start_ns=step * 1000, duration_ns=900, graph_mode="NONE")
            for layer in (0, 1, 2):
                w.add("layers", step=step, layer=layer, t_start_ns=step * 1000 + layer * 300,
                      duration_ns=300, syncs=None)  # fmt: skip
    w.finish()
    return traces / "nosync"


async def test_a_layer_nothing_checked_never_reads_clean(tmp_path: Path) -> None:
    app = MlaprofApp(_unwatched_run(tmp_path), interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await _until(pilot, lambda: _analysed(app))
        plain, style = await _verdict(pilot, 0)
    # the drill-down's count in the report's words for it, never 0 (nor a bare "-")
    assert "syncs not checked  S used" in plain and "syncs 0" not in plain, plain
    assert "syncs not checked (no step of this layer was watched for syncs)" in plain
    assert "no syncs or allocations recorded" not in plain
    assert "green" not in style, style


async def test_a_traces_counted_syncs_read_found_with_sites_unknown() -> None:
    run = shipped_runs.run_dir("aiter-eager_syncs")
    s = shipped_runs.summary("aiter-eager_syncs")
    app = MlaprofApp(run, interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await _until(pilot, lambda: _analysed(app))
        d = app.screen
        assert isinstance(d, DashboardScreen)
        # the per-step layer table: the step's host syncs, as the summary's layer rows count them
        await pilot.press("right_square_bracket")
        await _until(pilot, lambda: d.view.layer_scope == "step 0")
        found = {x.layer for x in s.trace.syncs.syncs if x.step == 0}
        assert {r.layer: r.syncs for r in d.view.layers} == {
            r.layer: 1.0 if r.layer in found else 0.0 for r in d.view.layers
        }
        plain, style = await _verdict(pilot, 0)
    assert "syncs 1" in plain
    assert "syncs found in this layer; sites unknown: counted from the API trace" in plain, plain
    assert "no syncs or allocations recorded" not in plain
    assert "red" in style and "green" not in style, style

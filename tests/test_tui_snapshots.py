"""SVG snapshots of the main screens at pinned terminal sizes (pytest-textual-snapshot).

Update after an intended change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and
look at the SVGs. Findings are mlaprof.analysis' own (the report's): each picture is taken once
the first analysis pass is in.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from mlaprof.store import runmeta
from mlaprof.synthetic.dashboard import make_run
from tui.app import MlaprofApp
from tui.screens.compare import CompareScreen
from tui.screens.dashboard import DashboardScreen

SIZES = [(80, 24), (160, 48)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("snap")
    make_run(root, "bug", steps=40, layers=6)
    make_run(root, "fix", steps=40, layers=6, bug=False)
    return root


async def _loaded(pilot: Pilot) -> None:
    app = pilot.app
    for _ in range(200):
        s = app.screen
        if (
            isinstance(s, DashboardScreen)
            and s.view is not None
            and s.view.steps
            and s.view.findings_source == "mlaprof.analysis"
        ):
            break
        await pilot.pause(0.05)
    await pilot.pause(0.1)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen(snap_compare, runs: Path, size: tuple[int, int]) -> None:  # noqa: ANN001
    assert snap_compare(
        MlaprofApp(runs / "bug", interval=0.05), terminal_size=size, run_before=_loaded
    )


def test_findings_panel_narrow(snap_compare, runs: Path) -> None:  # noqa: ANN001
    async def before(pilot: Pilot) -> None:
        await _loaded(pilot)
        await pilot.press("2")
        await pilot.pause(0.1)

    assert snap_compare(
        MlaprofApp(runs / "bug", interval=0.05), terminal_size=(80, 24), run_before=before
    )


def test_layer_drill_down(snap_compare, runs: Path) -> None:  # noqa: ANN001
    async def before(pilot: Pilot) -> None:
        await _loaded(pilot)
        pilot.app.screen.open_layer(2)
        await pilot.pause(0.2)

    assert snap_compare(
        MlaprofApp(runs / "bug", interval=0.05), terminal_size=(80, 24), run_before=before
    )


def test_compare_screen(snap_compare, runs: Path) -> None:  # noqa: ANN001
    async def before(pilot: Pilot) -> None:
        await _loaded(pilot)
        await pilot.press("c")
        for _ in range(100):  # B is read by its own follower
            s = pilot.app.screen
            if isinstance(s, CompareScreen) and s.b.view().steps == 40 and s.b.analysis:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.6)  # the compare screen redraws twice a second

    app = MlaprofApp(runs / "bug", compare=runs / "fix", interval=0.05)
    assert snap_compare(app, terminal_size=(160, 48), run_before=before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_picker(
    snap_compare,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    size: tuple[int, int],
) -> None:
    traces = tmp_path / "traces"
    for i, (name, bug) in enumerate((("bug", True), ("fix", False))):
        runmeta.update(
            make_run(traces, name, steps=4, layers=2, bug=bug), created=f"2026-01-0{i + 1}T10:00:00"
        )
    monkeypatch.chdir(tmp_path)  # the title names the folder as given: the same in every run

    async def before(pilot: Pilot) -> None:
        await pilot.pause(0.3)

    app = MlaprofApp(Path("traces"), interval=0.05)
    assert snap_compare(app, terminal_size=size, run_before=before)

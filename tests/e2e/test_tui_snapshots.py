"""SVG snapshots of every screen at 80x24 and 160x48 (pytest-textual-snapshot), and the key
columns and lines each screen must keep at both sizes, read from the rendered screen.

Update after an intended change with ``pytest tests/e2e/test_tui_snapshots.py --snapshot-update``
and look at the SVGs. Findings are mlaprof.analysis' own (the report's): each picture is taken
once the first analysis pass is in.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.app import App
from textual.pilot import Pilot

from mlaprof.scenario import Scenario
from mlaprof.store import create_run, runmeta
from mlaprof.synthetic.dashboard import make_run
from mlaprof.tui.app import MlaprofApp
from mlaprof.tui.screens.compare import CompareScreen
from mlaprof.tui.screens.dashboard import DashboardScreen
from mlaprof.tui.screens.help import HelpScreen
from mlaprof.tui.screens.layer import LayerScreen
from mlaprof.tui.screens.picker import PickerScreen
from mlaprof.tui.screens.whatif import WhatIfScreen

SIZES = [(80, 24), (160, 48)]


def screen_text(app: App) -> str:
    """The characters on the terminal, line by line (what a user reads)."""
    return "\n".join(
        "".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()
    )


async def _until(pilot: Pilot, cond: Callable[[], object], settle: float = 0.2) -> None:
    """Wait for the event ``cond`` (a loaded machine only delays it: the bound guards a hang,
    and a screen that never gets there fails on its text), then let the screen redraw."""
    for _ in range(12_000):
        if cond():
            break
        await pilot.pause(0.05)
    await pilot.pause(settle)


async def _loaded(pilot: Pilot) -> None:
    def ready() -> bool:
        s = pilot.app.screen
        return (
            isinstance(s, DashboardScreen)
            and s.view is not None
            and bool(s.view.steps)
            and s.view.findings_source == "mlaprof.analysis"
        )

    await _until(pilot, ready, settle=0.1)


async def _findings(pilot: Pilot) -> None:
    await _loaded(pilot)
    await pilot.press("2")
    await pilot.pause(0.1)


async def _layer(pilot: Pilot) -> None:
    await _loaded(pilot)
    pilot.app.screen.open_layer(2)
    await _until(pilot, lambda: isinstance(pilot.app.screen, LayerScreen))


async def _compare(pilot: Pilot) -> None:
    await _loaded(pilot)
    await pilot.press("c")  # the chooser, its cursor on --compare's run: enter keeps it
    await _until(pilot, lambda: isinstance(pilot.app.screen, PickerScreen), settle=0.1)
    await pilot.press("enter")

    def ready() -> bool:  # B is read by its own follower
        s = pilot.app.screen
        return isinstance(s, CompareScreen) and s.b.view().steps == 40 and s.b.full is not None

    await _until(pilot, ready, settle=0.6)  # the compare screen redraws twice a second


async def _help(pilot: Pilot) -> None:
    await _loaded(pilot)
    await pilot.press("question_mark")
    await _until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))


async def _whatif(pilot: Pilot) -> None:
    await _until(pilot, lambda: isinstance(pilot.app.screen, DashboardScreen), settle=0.3)
    await pilot.press("w")
    s = pilot.app.screen
    await _until(pilot, lambda: isinstance(s, WhatIfScreen) and s.result is not None)


async def _picker(pilot: Pilot) -> None:
    await pilot.pause(0.3)


def _scenario_run(root: Path) -> Path:
    sc = Scenario(model="kimi-k2-tp8", policy="aiter-gluon-v0.1.19", max_num_seqs=16)
    w = create_run(
        root, "modelled", {"scenario": sc.to_dict(), "backend": "torch", "device": "cpu"}
    )
    w.add("steps", step=0, duration_ns=1000, num_reqs=4, num_real_reqs=3, qlen=4)
    w.finish()
    runmeta.update(w.run_dir, created="2026-01-03T10:00:00")
    return w.run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("snap")
    make_run(root, "bug", steps=40, layers=6)
    make_run(root, "fix", steps=40, layers=6, bug=False)
    make_run(root, "pair", steps=40, layers=3, ranks=2)
    _scenario_run(root)
    return root


@pytest.fixture
def picker_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    traces = tmp_path / "traces"
    for i, (name, bug) in enumerate((("bug", True), ("fix", False))):
        runmeta.update(
            make_run(traces, name, steps=4, layers=2, bug=bug), created=f"2026-01-0{i + 1}T10:00:00"
        )
    monkeypatch.chdir(tmp_path)  # the title names the folder as given: the same in every run
    return Path("traces")


# screen -> (how to open it, what it must show at every size: its key columns and lines)
SCREENS: dict[str, tuple[Callable[[Pilot], Awaitable[None]], list[str]]] = {
    # the run's status and the capture result stay whole (the header wraps at 80 columns)
    "dashboard": (
        _loaded,
        ["layer", "S", "syncs", "q Quit", "? Help", "finished", "FULL -> failed (runs PIECEWISE)"],
    ),  # fmt: skip
    # two ranks: never merged (each rank's rows, steps per rank with the ranks behind them)
    "ranks": (
        _loaded,
        [
            "ranks 0-1",
            "40 steps per rank (2 ranks)",
            "rank",
            "layer",
            "-> failed (runs PIECEWISE)",
        ],
    ),  # fmt: skip
    "findings": (_findings, ["CRIT  FULL graph capture failed", "q Quit"]),
    "layer": (_layer, ["layer 2", "aten._local_scalar_dense", "mla/legacy.py:100", "count"]),
    "compare": (_compare, ["A: bug", "B: fix", "S used", "change", "B is", "better"]),
    "help": (_help, ["dashboard: keys  (escape or ? closes)", "drill down", "q  ", "quit"]),
    "whatif": (_whatif, ["S bug", "S fix", "S frz", "bug x", "frozen x", "B+pad: requests"]),
    "picker": (
        _picker,
        ["bug", "fix", "traces", "steps", "device", "policy", "NVIDIA H200 (test)"],
    ),  # fmt: skip
}


def _app(name: str, runs: Path, picker_runs: Path) -> MlaprofApp:
    if name == "picker":
        return MlaprofApp(picker_runs, interval=0.05)
    if name == "compare":
        return MlaprofApp(runs / "bug", compare=runs / "fix", interval=0.05)
    if name == "ranks":
        return MlaprofApp(runs / "pair", interval=0.05)
    return MlaprofApp(runs / ("modelled" if name == "whatif" else "bug"), interval=0.05)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SCREENS))
def test_screen(snap_compare, runs: Path, picker_runs: Path, name: str, size) -> None:  # noqa: ANN001
    before, _ = SCREENS[name]

    async def opened(pilot: Pilot) -> None:  # the screen as the next test reads it, kept
        await before(pilot)
        _TEXT[name, size] = screen_text(pilot.app)

    assert snap_compare(_app(name, runs, picker_runs), terminal_size=size, run_before=opened)


# (screen, size) -> the characters test_screen's picture was taken of: the key-column test
# reads them instead of opening the same screen again (it opens it when run on its own)
_TEXT: dict[tuple[str, tuple[int, int]], str] = {}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(SCREENS))
async def test_screen_keeps_its_key_columns(
    runs: Path, picker_runs: Path, name: str, size: tuple[int, int]
) -> None:
    before, wanted = SCREENS[name]
    size = tuple(size)
    text = _TEXT.get((name, size))
    if text is None:
        app = _app(name, runs, picker_runs)
        async with app.run_test(size=size) as pilot:
            await before(pilot)
            text = screen_text(app)
    lines = text.splitlines()
    assert len(lines) == size[1] and all(len(line) <= size[0] for line in lines)
    missing = [w for w in wanted if w not in text]
    assert not missing, f"{name} at {size[0]}x{size[1]} lacks {missing}:\n{text}"
    assert "…" not in text or name in ("dashboard", "ranks", "findings", "compare", "layer"), text
    assert "None" not in text, text  # a value not recorded reads so, never as Python's None


async def test_the_picker_keeps_steps_device_and_policy_whole_at_80_columns(
    tmp_path: Path,
) -> None:
    """The shipped demo runs (long names) and an imported trace (device "NVIDIA H200", which
    once widened the columns past the edge) at 80x24: every run's status, min_kv_mode, whole
    policy, steps and device read on its line, so a bug run and its fix look different; the
    cursor's run reads whole under the table. (This test once listed the working tree's
    traces/ and failed after a user's `mlaprof import`: it reads a copy.)"""
    import re

    from mlaprof.importers.kineto import import_kineto
    from tests import shipped_demo
    from tests.conftest import ROOT

    traces = tmp_path / "traces"
    shutil.copytree(shipped_demo.traces(), traces)
    import_kineto(ROOT / "tests" / "data" / "kineto_graph_replay.json.gz", traces, "imported")
    app = MlaprofApp(traces, interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: "imported" in screen_text(app))
        text = screen_text(app)
        cursor = app.screen.paths[0].relative_to(traces).as_posix()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    policy = r"(aiter-gluon-v0\.1\.19|mlaprof-triton|-)"
    row = re.compile(
        rf"^\s*(finished)\s+(all-rows|active-rows|-)\s+{policy}\s+(\d+)(?: committed)?\s+"
        r"(cuda|NVIDIA H200)\s"
    )
    rows = [m.groups() for line in lines if (m := row.match(line))]
    assert len(rows) == 7, text  # 6 demo runs and the import
    assert ("NVIDIA H200" in {r[4] for r in rows}) and {r[3] for r in rows} >= {"32"}, rows
    # the padding bug and its fix: the same policy, told apart by min_kv_mode on their lines
    modes = {r[1] for r in rows if r[2] == "aiter-gluon-v0.1.19"}
    assert modes == {"all-rows", "active-rows"}, rows
    assert any(line.strip().startswith(cursor) for line in lines), (cursor, text)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_layer_screen_keeps_file_and_line_whole(size: tuple[int, int]) -> None:
    """A shipped demo run's syncs sit at mlaprof/backends/legacy_flat.py:NN: at 80 columns the
    location lost its line number; the file and line now read whole (the folders go first)."""
    import re

    from tests import shipped_demo

    app = MlaprofApp(shipped_demo.run("bug-legacy-flat-syncs-break-capture"), interval=0.05)
    async with app.run_test(size=size) as pilot:
        await _loaded(pilot)
        pilot.app.screen.open_layer(0)
        await _until(pilot, lambda: isinstance(pilot.app.screen, LayerScreen), settle=0.3)
        text = screen_text(app)
    sites = re.findall(r"legacy_flat\.py:(\d+)\s+(\d+)", text)  # file:line, then its count
    assert len(sites) >= 4, text
    assert ("mlaprof/backends/legacy_flat.py:" in text) == (size[0] >= 120), text

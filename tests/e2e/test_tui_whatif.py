"""The TUI's what-if screen: the modelled grid of the run's configuration, worst cells first."""

from __future__ import annotations

from pathlib import Path

from mlaprof.scenario import Scenario
from mlaprof.store import create_run
from mlaprof.synthetic.dashboard import make_run
from mlaprof.tui import follower
from mlaprof.tui.app import MlaprofApp
from mlaprof.tui.screens.whatif import WhatIfScreen
from mlaprof.tui.widgets.table import ViewTable
from tests.e2e.test_tui_app import loaded, wait_for


def _run(tmp_path: Path, scenario: dict) -> Path:
    w = create_run(tmp_path, "r", {"scenario": scenario, "backend": "torch", "device": "cpu"})
    w.add("steps", step=0, duration_ns=1000, num_reqs=4, num_real_reqs=3, qlen=4)
    w.finish()
    return w.run_dir


async def test_w_opens_the_grid_of_the_runs_configuration(tmp_path, monkeypatch):
    monkeypatch.setattr(follower, "analyze_run", lambda path: (None, "analysis skipped here"))
    sc = Scenario(model="kimi-k2-tp8", policy="aiter-gluon-v0.1.19", max_num_seqs=16)
    app = MlaprofApp(_run(tmp_path, sc.to_dict()))
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WhatIfScreen) and app.screen.result)
        screen = app.screen
        title = str(screen.query_one("#whatif-title").render())
        assert "modelled for kimi-k2-tp8" in title and "aiter-gluon-v0.1.19" in title
        assert f"{screen.result.count('collapsed')} collapse" in title
        table = screen.query_one("#whatif-table", ViewTable)
        assert len(table._lines) == 40 and "S bug" in table._head_line
        await pilot.press("escape")
        assert not isinstance(app.screen, WhatIfScreen)


async def test_a_run_without_scenario_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(follower, "analyze_run", lambda path: (None, "analysis skipped here"))
    make_run(tmp_path, "bug", steps=2, layers=2)
    app = MlaprofApp(tmp_path / "bug")
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot)
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WhatIfScreen))
        await pilot.pause(0.2)
        assert "no scenario" in str(app.screen.query_one("#whatif-title").render())

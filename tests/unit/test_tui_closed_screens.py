"""A screen's worker delivers its result from a thread (run B's follower in compare, the what-if
grid): one that lands after the screen closed draws nothing (it queried widgets gone with the
screen and failed the app's worker, seen once in a CI run as NoMatches for '#compare-title')."""

from __future__ import annotations

from pathlib import Path

from mlaprof.tui.screens.compare import CompareScreen


class _NoView:
    def view(self) -> object:
        raise AssertionError("a closed compare screen read its runs")


def test_an_update_after_the_screen_closed_draws_nothing(tmp_path: Path) -> None:
    screen = CompareScreen(_NoView(), tmp_path / "b")  # type: ignore[arg-type]
    screen.b = _NoView()  # type: ignore[assignment]
    screen.stop.set()  # what on_unmount does
    assert screen.draw() is None
    screen.stop.clear()  # never mounted: no widgets to query either
    assert screen.draw() is None


def test_a_whatif_grid_that_finishes_after_the_screen_closed_draws_nothing() -> None:
    """The what-if grid is computed in a worker; closing the screen before it ends (escape
    right after `w`) must not query the widgets gone with the screen."""
    from mlaprof.tui.screens.whatif import WhatIfScreen

    screen = WhatIfScreen({"scenario": {"model": "m", "policy": "p", "target": "t"}})

    class _Grid:
        def records(self, _i: object) -> list:
            raise AssertionError("a closed what-if screen drew its grid")

        def worst_index(self, _n: int) -> int:
            return 0

    assert screen._show(_Grid()) is None and screen.result is None

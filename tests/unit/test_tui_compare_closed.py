"""The compare screen's follower of run B delivers updates from a thread: one that lands after
the screen closed draws nothing (it queried widgets gone with the screen and failed the app's
worker, seen once in a CI run as NoMatches for '#compare-title')."""

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

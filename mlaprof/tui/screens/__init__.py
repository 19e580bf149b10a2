"""Dashboard screens: main dashboard, layer drill-down, compare, run picker, help."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.screen import Screen


def still_open(screen: Screen) -> bool:
    """``screen`` may still draw what a worker thread hands it: it is mounted and on the app's
    stack (covered by another screen included). A screen being popped is off the stack at once
    but reads mounted while its widgets go: a late update then queried a widget already gone."""
    return screen.is_mounted and screen in screen.app.screen_stack

"""The capture section, as the report renders it (:func:`mlaprof.tui.text.capture_panel`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from mlaprof.tui.text import capture_panel

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class CapturePanel(VerticalScroll, can_focus=True):
    """Scrollable ``label: value`` lines of the capture section (the panel wraps the long
    ones; redrawn only when they change)."""

    _text: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="capture-text", markup=False)

    def show_view(self, v: View) -> None:
        title, lines = capture_panel(v)
        title = title[:1].upper() + title[1:]
        if self.border_title != title:
            self.border_title = title
        text = "\n".join(lines)
        if self._text != text:
            self._text = text
            self.query_one("#capture-text", Static).update(text)

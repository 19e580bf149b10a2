"""Engine runs, imported traces and imported vLLM logs: the analysis' own sections as text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from mlaprof.tui.text import detail_lines

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class DetailsPanel(VerticalScroll, can_focus=True):
    """Scrollable lines of :func:`tui.text.detail_lines` (redrawn only when they change)."""

    _text: str | None = None  # what is shown (redraw only on change)

    def compose(self) -> ComposeResult:
        yield Static("", id="details-text", markup=False)

    def show_view(self, v: View) -> bool:
        """Show the lines; True when there are any (the dashboard shows the panel only then)."""
        text = "\n".join(detail_lines(v))
        body = self.query_one("#details-text", Static)
        if self._text != text:
            self._text = text
            body.update(text)
        return bool(text)

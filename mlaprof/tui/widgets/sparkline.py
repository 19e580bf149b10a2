"""Multi-line block sparkline on the line API (one styled string per line: cheap to repaint)."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from mlaprof.tui.widgets.styles import CachedStyles

EIGHTHS = " ▁▂▃▄▅▆▇█"


class Spark(CachedStyles, Widget):
    """The last ``width`` values as bars, min..max scaled over the widget's height."""

    COMPONENT_CLASSES = {"spark--bar", "spark--last"}
    DEFAULT_CSS = """
    Spark > .spark--bar { color: $primary; }
    Spark > .spark--last { color: $warning; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.values: list[float] = []
        self._rows: list[str] = []

    def set_values(self, values: list[float]) -> None:
        if values != self.values:
            self.values = list(values)
            self._rows = []
            self.refresh()

    def _layout_rows(self, width: int, height: int) -> list[str]:
        vals = self.values[-width:]
        if not vals:
            return [" " * width] * height
        lo, hi = min(vals), max(vals)
        span = (hi - lo) or 1.0
        levels = height * 8
        # at least one eighth so the minimum still shows
        ticks = [max(1, round((v - lo) / span * (levels - 1)) + 1) for v in vals]
        rows = []
        for line in range(height):
            floor = (height - 1 - line) * 8
            rows.append("".join(EIGHTHS[min(8, max(0, t - floor))] for t in ticks).ljust(width))
        return rows

    def on_resize(self) -> None:
        self._rows = []

    def render_line(self, y: int) -> Strip:
        width, height = self.size.width, self.size.height
        if len(self._rows) != height or (self._rows and len(self._rows[0]) != width):
            self._rows = self._layout_rows(width, height)
        text = self._rows[y] if y < len(self._rows) else " " * width
        n = min(len(self.values), width)
        bar, last = self._style("spark--bar"), self._style("spark--last")
        if n and text:
            return Strip([Segment(text[: n - 1], bar), Segment(text[n - 1 :], last)], width)
        return Strip([Segment(text, bar)], width)

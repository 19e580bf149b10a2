"""A light read-only table on Textual's line API, fed from :mod:`tui.text` rows.

Why not ``DataTable``: it renders every visible cell through Rich on each change, which made a
dashboard repaint cost hundreds of milliseconds on a loaded 2-core machine. Here each row is one
pre-formatted string, so a repaint is a slice and a style per visible line. Sticky header (click
sorts), row cursor (keys, mouse), Enter or a click on the cursor row selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mlaprof.reporters.rows import numeric_column
from mlaprof.tui.widgets.styles import CachedStyles

if TYPE_CHECKING:
    from mlaprof.tui.text import Table

GAP = 2


class ViewTable(CachedStyles, ScrollView, can_focus=True):
    """Row-cursor table that keeps the cursor where it was across refreshes."""

    COMPONENT_CLASSES = {
        "view-table--header",
        "view-table--cursor",
        "view-table--even",
    }
    DEFAULT_CSS = """
    ViewTable { background: $surface; }
    ViewTable > .view-table--header { text-style: bold; color: $text-accent; }
    ViewTable > .view-table--cursor { background: $block-cursor-blurred-background; }
    ViewTable:focus > .view-table--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
    }
    ViewTable > .view-table--even { background: $surface-lighten-1; }
    """
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor(-1000000000)", "First", show=False),
        Binding("end", "cursor(1000000000)", "Last", show=False),
        Binding("enter", "select", "Select", show=False),
    ]

    cursor_row: reactive[int] = reactive(0)

    class Selected(Message):
        """Enter or a click on the cursor row."""

        def __init__(self, table: ViewTable, row: int, key: str | None) -> None:
            super().__init__()
            self.table = table
            self.row = row
            self.key = key

        @property
        def control(self) -> ViewTable:
            return self.table

    class HeaderClicked(Message):
        def __init__(self, table: ViewTable, column: int) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> ViewTable:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: Table | None = None
        self._keys: list[str] | None = None
        self._head_line = ""
        self._lines: list[str] = []
        self._spans: list[tuple[int, int]] = []  # column x ranges, for header clicks
        self._notes: list[str] = []  # lines under the rows (a legend): no cursor, no columns

    # -- data ----------------------------------------------------------------------------------
    def show(self, table: Table, keys: list[str] | None = None, notes: Sequence[str] = ()) -> None:
        """``notes``: lines drawn under the rows, outside the columns (a cell's legend)."""
        if table == self._shown and keys == self._keys and list(notes) == self._notes:
            return
        self._notes = list(notes)
        head, rows = table
        cols = list(zip(head, *rows, strict=True)) if head else []
        widths = [max(len(c) for c in col) for col in cols]
        right = [numeric_column(col[1:]) for col in cols]  # the reports' rule

        def fmt(cells: list[str]) -> str:
            return (" " * GAP).join(
                c.rjust(w) if r else c.ljust(w)
                for c, w, r in zip(cells, widths, right, strict=True)
            )

        self._head_line = " " + fmt(head)
        self._lines = [" " + fmt(r) for r in rows]
        self._spans, x = [], 1
        for w in widths:
            self._spans.append((x, x + w))
            x += w + GAP
        self._shown, self._keys = table, keys
        lines = [self._head_line, *self._lines, *(" " + n for n in self._notes)]
        width = max(len(s) for s in lines) + 1
        size = Size(width, len(rows) + 1 + len(self._notes))
        if size != self.virtual_size:
            self.virtual_size = size
        if rows and self.cursor_row >= len(rows):
            self.cursor_row = len(rows) - 1
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self._lines)

    def get_row_at(self, row: int) -> list[str]:
        if self._shown is None or not 0 <= row < len(self._shown[1]):
            raise IndexError(row)
        return list(self._shown[1][row])

    def row_key(self, row: int) -> str | None:
        return self._keys[row] if self._keys and 0 <= row < len(self._keys) else None

    # -- cursor --------------------------------------------------------------------------------
    def move_cursor(self, row: int) -> None:
        self.cursor_row = max(0, min(row, max(0, self.row_count - 1)))

    def watch_cursor_row(self, old: int, new: int) -> None:
        body = max(1, self.scrollable_content_region.height - 1)
        y = int(self.scroll_offset.y)
        if new < y:
            self.scroll_to(y=new, animate=False)
        elif new >= y + body:
            self.scroll_to(y=new - body + 1, animate=False)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, delta: int) -> None:
        self.move_cursor(
            self.cursor_row + delta * max(1, self.scrollable_content_region.height - 1)
        )

    def action_select(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor_row, self.row_key(self.cursor_row)))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        x = offset.x + int(self.scroll_offset.x)
        if offset.y == 0:
            for i, (a, b) in enumerate(self._spans):
                if a <= x < b + GAP:
                    self.post_message(self.HeaderClicked(self, i))
                    return
            return
        row = int(self.scroll_offset.y) + offset.y - 1
        if not 0 <= row < self.row_count:
            return
        if row == self.cursor_row:
            self.action_select()
        else:
            self.move_cursor(row)

    # -- drawing -------------------------------------------------------------------------------
    def _style_key(self, name: str) -> tuple[str, bool]:
        return (name, self.has_focus)  # the cursor row looks different with focus

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        sx = int(self.scroll_offset.x)
        if y == 0:
            style = self._style("view-table--header")
            text = self._head_line if self._shown else " (no records)"
        else:
            row = int(self.scroll_offset.y) + y - 1
            if row >= len(self._lines):
                note = row - len(self._lines)
                if note >= len(self._notes):
                    return Strip.blank(width, self._style("base"))
                line = (" " + self._notes[note])[sx : sx + width].ljust(width)
                return Strip([Segment(line, self._style("base"))], width)
            text = self._lines[row]
            if row == self.cursor_row and self.row_count:
                style = self._style("view-table--cursor")
            elif row % 2:
                style = self._style("view-table--even")
            else:
                style = self._style("base")
        text = text[sx : sx + width].ljust(width)
        return Strip([Segment(text, style)], width)

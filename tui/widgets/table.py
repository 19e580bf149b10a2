"""A read-only DataTable fed from :mod:`tui.text` rows; it redraws only when the rows change."""

from __future__ import annotations

from textual.widgets import DataTable

from tui.text import Table


class ViewTable(DataTable):
    """Row-cursor table that keeps the cursor where it was across refreshes."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._shown: Table | None = None

    def show(self, table: Table, keys: list[str] | None = None) -> None:
        if table == self._shown:
            return
        head, rows = table
        row = self.cursor_row
        if self._shown is None or self._shown[0] != head:
            self.clear(columns=True)
            self.add_columns(*head)
        else:
            self.clear()
        for i, r in enumerate(rows):
            self.add_row(*r, key=keys[i] if keys else None)
        self._shown = table
        if rows:
            self.move_cursor(row=min(row, len(rows) - 1), animate=False, scroll=False)

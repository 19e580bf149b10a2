"""Capture memory and outcome per capture size."""

from __future__ import annotations

from tui.state import View
from tui.text import memory_table
from tui.widgets.table import ViewTable


class MemoryTable(ViewTable):
    def show_view(self, v: View) -> None:
        self.show(memory_table(v))

"""Capture memory and outcome per capture size."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.text import capture_title, memory_table
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class MemoryTable(ViewTable):
    def show_view(self, v: View) -> None:
        title = capture_title(v)
        if self.border_title != title:
            self.border_title = title
        self.show(memory_table(v))

"""KV splits per capture size and policy: S used vs deserved, frozen S, occupancy."""

from __future__ import annotations

from tui.state import View
from tui.text import split_table
from tui.widgets.table import ViewTable


class SplitsTable(ViewTable):
    def show_view(self, v: View) -> None:
        self.show(split_table(v))

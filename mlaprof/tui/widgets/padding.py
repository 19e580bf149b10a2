"""Padding: real vs padding rows per capture size, and what they waste."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.text import padding_panel
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class PaddingTable(ViewTable):
    def show_view(self, v: View) -> None:
        title, table = padding_panel(v)
        title = title[:1].upper() + title[1:]
        if self.border_title != title:
            self.border_title = title
        self.show(table)

"""Padding: real vs padding rows per capture size, and what they waste."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.text import padding_table
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class PaddingTable(ViewTable):
    def show_view(self, v: View) -> None:
        self.show(padding_table(v))

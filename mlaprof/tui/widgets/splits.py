"""KV splits per capture size and policy: S used vs deserved, frozen S, occupancy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.text import split_table, splits_note, splits_title
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class SplitsTable(ViewTable):
    def show_view(self, v: View) -> None:
        title = splits_title(v)
        if self.border_title != title:
            self.border_title = title
        note = splits_note(v) or ""  # an imported trace: where its S is, never "no records"
        if self.border_subtitle != note:
            self.border_subtitle = note
        self.show(split_table(v))

"""KV splits per capture size and policy: S used vs deserved, frozen S, occupancy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.text import split_notes, split_table, splits_border
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class SplitsTable(ViewTable):
    def show_view(self, v: View) -> None:
        # the report's title: its name above, where its S come from below (or, for an imported
        # trace, where its S is: never "no records")
        title, under = splits_border(v)
        if self.border_title != title:
            self.border_title = title
        if self.border_subtitle != under:
            self.border_subtitle = under
        self.show(split_table(v), notes=split_notes(v))

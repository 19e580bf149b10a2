"""Per-layer table: time, syncs, S used / deserved, occupancy. Sortable; Enter drills down."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.messages import DrillDown
from mlaprof.tui.text import LAYER_COLUMNS, layer_table
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class LayersTable(ViewTable):
    def show_view(self, v: View) -> None:
        title = f"layers ({v.layer_scope})"
        if self.border_title != title:
            self.border_title = title
        self.show(layer_table(v), keys=[str(r["layer"]) for r in v.layers])

    def on_view_table_selected(self, event: ViewTable.Selected) -> None:
        event.stop()
        if event.key is not None and event.key.lstrip("-").isdigit():
            self.post_message(DrillDown(int(event.key)))

    def on_view_table_header_clicked(self, event: ViewTable.HeaderClicked) -> None:
        # the screen owns the sort order
        event.stop()
        self.screen.sort_layers(LAYER_COLUMNS[event.column][0])  # type: ignore[attr-defined]

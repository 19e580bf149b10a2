"""Per-layer table: time, syncs, S used / deserved, occupancy. Sortable; Enter drills down."""

from __future__ import annotations

from textual.widgets import DataTable

from tui.messages import DrillDown
from tui.state import View
from tui.text import LAYER_COLUMNS, layer_table
from tui.widgets.table import ViewTable


class LayersTable(ViewTable):
    def show_view(self, v: View) -> None:
        self.border_title = f"layers ({v.layer_scope})"
        self.show(layer_table(v), keys=[str(r["layer"]) for r in v.layers])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(DrillDown(int(event.row_key.value)))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        # bubble up as a sort request; the screen owns the sort order
        event.stop()
        self.screen.sort_layers(LAYER_COLUMNS[event.column_index][0])  # type: ignore[attr-defined]

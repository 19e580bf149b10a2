"""Per-layer table (one row per rank and layer where several ranks are shown): the analysis'
layer rows. Sortable; Enter drills down."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.tui.messages import DrillDown
from mlaprof.tui.text import layer_columns, layer_table
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class LayersTable(ViewTable):
    def show_view(self, v: View) -> None:
        title = f"layers ({v.layer_scope}; syncs {v.sync_text})"
        if self.border_title != title:
            self.border_title = title
        self._columns = layer_columns(v)
        self.show(layer_table(v), keys=[f"{r.layer}@{r.rank}" for r in v.layers])

    def on_view_table_selected(self, event: ViewTable.Selected) -> None:
        event.stop()
        layer = (event.key or "").partition("@")[0]
        if layer.lstrip("-").isdigit():
            self.post_message(DrillDown(int(layer)))

    def on_view_table_header_clicked(self, event: ViewTable.HeaderClicked) -> None:
        # the screen owns the sort order
        event.stop()
        columns = getattr(self, "_columns", ())
        if event.column < len(columns):
            self.screen.sort_layers(columns[event.column][0])  # type: ignore[attr-defined]

"""Layer drill-down: the syncs of one layer with op and source line, and its split numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from mlaprof.analysis.step_syncs import CLEAN, FOUND, NOT_CHECKED, layer_verdict
from mlaprof.tui.fmt import fmt_ms
from mlaprof.tui.text import (
    collapsed_cell,
    layer_ms,
    reference_cell,
    s_used_cell,
    sync_table,
    syncs_cell,
)
from mlaprof.tui.widgets.table import ViewTable

if TYPE_CHECKING:
    from mlaprof.analysis.sections import LayerRow
    from mlaprof.tui.follower import RunFollower
    from mlaprof.tui.view import Selection


# how each level of a layer's sync verdict is drawn: unknown is never green
VERDICT_STYLE = {FOUND: "bold red", CLEAN: "green", NOT_CHECKED: "yellow"}


def _ref_label(row: LayerRow | None) -> str:
    return "fix" if row is not None and row.reference_source == "fix" else "deserved"


class LayerScreen(Screen):
    HELP_TITLE = "layer drill-down"
    HELP = (
        ("up / down", "move in the table of syncs and allocations"),
        ("[  ]", "previous / next layer"),
        ("escape / backspace", "back to the dashboard"),
    )
    BINDINGS = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("left_square_bracket", "layer(-1)", "Layer ◀"),
        Binding("right_square_bracket", "layer(1)", "Layer ▶"),
    ]

    def __init__(self, follower: RunFollower, sel: Selection, layer: int) -> None:
        super().__init__()
        self.follower = follower
        self.sel = sel  # the dashboard's selection (rank, step, sort), shared
        self.layer_no = layer

    def compose(self) -> ComposeResult:
        yield Static(id="layer-summary")
        yield ViewTable(id="layer-syncs")
        yield Footer()

    def on_mount(self) -> None:
        self.draw()
        self.set_interval(0.5, self.draw)

    def action_layer(self, delta: int) -> None:
        v = self.follower.selected_view(self.sel, self.follower.latest)
        layers = sorted(r.layer for r in v.layers)
        if self.layer_no in layers:
            i = layers.index(self.layer_no) + delta
            self.layer_no = layers[max(0, min(len(layers) - 1, i))]
            self.draw()

    def draw(self) -> None:
        v = self.follower.selected_view(self.sel, self.follower.latest)
        # the first shown rank's row (all ranks: each rank's row is in the dashboard's table)
        row = next((r for r in v.layers if r.layer == self.layer_no), None)
        # the table's border and padding take 4 columns of the screen
        head, rows = sync_table(v, self.layer_no, width=self.app.size.width - 4)
        # the analysis' verdict on the layer's syncs: found, clean only where checked, else
        # "not checked" (never the empty site list read as clean)
        verdict = layer_verdict(row, len(rows), v.host_syncs)
        t = Text.assemble(
            (f" layer {self.layer_no} ", "bold reverse"),
            f"  {v.name}  ({v.layer_scope}, {v.rank_label})\n",
            f" time {fmt_ms(layer_ms(row))} ms  "
            f"syncs {syncs_cell(row)}  "
            f"S used {'-' if row is None else s_used_cell(row)} / "
            f"{_ref_label(row)} {reference_cell(row)}  "
            f"collapsed {collapsed_cell(row)}\n",
            (f" {verdict.text}", VERDICT_STYLE[verdict.level]),
        )
        self.query_one("#layer-summary", Static).update(t)
        table = self.query_one("#layer-syncs", ViewTable)
        table.border_title = "syncs and allocations (op, source line), all steps"
        table.show((head, rows))

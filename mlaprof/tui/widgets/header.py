"""Run header: scenario, device, graph mode, capture status, rank, follow state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from mlaprof.tui.fmt import fmt_count

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class RunHeader(Static):
    def show(self, v: View, state: str) -> None:
        capture_style = "bold red" if v.capture_failed else "green"
        t = Text.assemble(
            (f" {v.name} ", "bold reverse"),
            "  scenario ",
            (v.scenario, "bold"),
            "  device ",
            (v.device, "bold"),
            "  backend ",
            (v.backend, "bold"),
            "\n ",
            (state, "bold yellow" if not state.startswith("finished") else "bold"),
            f"  {fmt_count(v.steps)} steps  {fmt_count(v.events)} events  ",
            (v.rank_label, "bold cyan"),
            "  graph ",
            (v.graph_mode, "bold"),
            "  capture ",
            (v.capture, capture_style),
        )
        if t.plain != getattr(self, "_plain", None):
            self._plain = t.plain
            self.update(t, layout=False)  # fixed height (tcss): never relayout the screen

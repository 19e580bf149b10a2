"""Run header: scenario, device, graph mode, capture status, rank, follow state."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.state import View, fmt_count


class RunHeader(Static):
    def show(self, v: View, state: str) -> None:
        capture_style = "bold red" if v.capture.startswith("FAILED") else "green"
        t = Text.assemble(
            (f" {v.name} ", "bold reverse"),
            "  scenario ",
            (v.scenario, "bold"),
            "  device ",
            (v.device, "bold"),
            "  backend ",
            (v.backend, "bold"),
            "\n graph ",
            (v.graph_mode, "bold"),
            "  capture ",
            (v.capture, capture_style),
            "  ",
            (v.rank_label, "bold cyan"),
            "  ",
            (state, "bold yellow" if state != "finished" else "bold"),
            f"  {fmt_count(v.steps)} steps  {fmt_count(v.events)} events",
        )
        self.update(t)

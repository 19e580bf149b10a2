"""Step latency over time: a sparkline of recent steps with its percentiles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from mlaprof.tui.text import latency_line
from mlaprof.tui.widgets.sparkline import Spark

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class LatencyPanel(Vertical):
    def compose(self) -> ComposeResult:
        yield Label("step latency: waiting for steps", id="latency-label")
        yield Spark(id="latency-spark")

    def show(self, v: View) -> None:
        label = latency_line(v, max(20, self.size.width or 78))
        self.query_one("#latency-label", Label).update(label, layout=False)
        width = max(1, self.size.width or 80)
        self.query_one("#latency-spark", Spark).set_values(v.latency_ms[-width:])

"""Run header: follow state, capture result, rank, run, steps per rank, scenario, device."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from mlaprof.tui.fmt import fmt_count

if TYPE_CHECKING:
    from mlaprof.tui.view import View


class RunHeader(Static):
    """Line 1 keeps what a narrow terminal must not lose: the follow state and the capture
    result ("FULL -> failed (runs PIECEWISE)"); the run's name and the rest follow (a third line
    on narrow screens, ``-narrow`` in the stylesheet)."""

    def show(self, v: View, state: str) -> None:
        capture_style = "bold red" if v.capture_failed else "green"
        t = Text.assemble(
            " ",
            (state, "bold yellow" if not state.startswith("finished") else "bold"),
            "  capture ",
            (v.capture, capture_style),
            "  ",
            (v.rank_label, "bold cyan"),
            "\n",
            (f" {v.name} ", "bold reverse"),
            f"  {v.steps_text}  {fmt_count(v.events)} records",
            "  " + ("provisional" if v.provisional else ""),
            f"\n {v.origin} ",
            (v.scenario, "bold"),
            "  device ",
            (v.device, "bold"),
            "  backend ",
            (v.backend, "bold"),
        )
        if t.plain != getattr(self, "_plain", None):
            self._plain = t.plain
            self.update(t, layout=False)  # fixed height (tcss): never relayout the screen

"""Help: every key of the dashboard."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("p / space", "pause / resume following (the display freezes; new records wait)"),
    ("[  ]", "step back / forward: the layer table shows one step"),
    ("a", "back to all steps (mean over the run)"),
    ("enter / click", "drill down into the selected layer: its syncs with op and source line"),
    ("s / click header", "sort the layer table (again: reverse)"),
    ("r", "rank: all ranks aggregated, then each rank"),
    ("1-5 / tab", "panel: layers, findings, KV splits, padding, capture (narrow terminals)"),
    ("c", "compare with another run side by side (bug vs fix)"),
    ("e", "export the run (Perfetto / rocpd / CSV, when the exporters are installed)"),
    ("w", "what if: modelled split collapse and slowdown around this run's configuration"),
    ("escape", "back"),
    ("?", "this help"),
    ("q", "quit"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        width = max(len(k) for k, _ in KEYS)
        body = "\n".join(f"[b]{k:<{width}}[/b]  {text}" for k, text in KEYS)
        with Vertical(id="help-box"):
            yield Static("[b]mlaprof tui: keys[/b]\n\n" + body + "\n\n[dim]escape closes[/dim]")

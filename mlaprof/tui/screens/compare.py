"""Two runs side by side (e.g. bug vs fix): key numbers with their change, and both findings."""

from __future__ import annotations

import threading
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from mlaprof.textsafe import term
from mlaprof.tui.compare import HEAD, compare_table
from mlaprof.tui.follower import RunFollower, follow
from mlaprof.tui.screens import still_open
from mlaprof.tui.text import empty_findings_ok, empty_findings_text
from mlaprof.tui.widgets.findings import FindingsList
from mlaprof.tui.widgets.table import ViewTable


class CompareScreen(Screen):
    HELP_TITLE = "compare"
    HELP = (
        ("up / down", "move in the table of metrics"),
        ("escape / c", "back to the dashboard"),
    )
    BINDINGS = [Binding("escape,c", "app.pop_screen", "Back")]
    SHORT_BELOW = 120  # columns: below it, the table names metrics short (the legend says more)

    def __init__(self, a: RunFollower, b_path: Path) -> None:
        super().__init__()
        self.a = a
        self.b = RunFollower(b_path)
        self.stop = threading.Event()
        self.paused = threading.Event()

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title")
        yield ViewTable(id="compare-table")
        with Horizontal(id="compare-findings"):
            yield FindingsList(id="findings-a")
            yield FindingsList(id="findings-b")
        yield Footer()

    def on_mount(self) -> None:
        self._follow_b()
        self.set_interval(0.5, self.draw)

    def on_unmount(self) -> None:
        self.stop.set()

    @work(thread=True, group="follow-b")
    def _follow_b(self) -> None:
        def update(_n: int) -> None:
            try:
                self.app.call_from_thread(self.draw)
            except RuntimeError:
                self.stop.set()

        follow(self.b, update, lambda _t: update(0), self.stop, self.paused)

    def draw(self) -> None:
        # B's follower delivered an update after the screen closed, or while it is being
        # closed (popped, its widgets going while it still reads mounted): nothing to draw
        if self.stop.is_set() or not still_open(self):
            return
        a, b = self.a.view(), self.b.view()
        sa, sb = self.a.summary(), self.b.summary()
        rows, legend = compare_table(sa, sb, self.app.size.width < self.SHORT_BELOW)
        self.query_one("#compare-title", Static).update(
            f"[b]compare[/b]  A: [b]{term(a.name)}[/b] ({term(a.scenario)}, {term(a.backend)})   "
            f"B: [b]{term(b.name)}[/b] ({term(b.scenario)}, {term(b.backend)})"
            + (f"\n[red]! B: {term(b.problem)}[/red]" if b.problem else "")
            + "".join(f"\n[dim]{term(line)}[/dim]" for line in legend.splitlines())
        )
        table = self.query_one("#compare-table", ViewTable)
        table.show((HEAD, rows))
        self.query_one("#findings-a", FindingsList).show(
            a.findings, f"A: {a.name}", empty_findings_text(a), empty_findings_ok(a)
        )
        self.query_one("#findings-b", FindingsList).show(
            b.findings, f"B: {b.name}", empty_findings_text(b), empty_findings_ok(b)
        )

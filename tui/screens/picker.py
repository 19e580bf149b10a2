"""Run picker: the runs of a folder, newest first, with scenario, device and status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from mlaprof.errors import MlaprofError
from tui.runs import collect_runs
from tui.widgets.table import ViewTable


class PickerScreen(Screen[Path | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Back"),
        Binding("g", "reload", "Reload"),
    ]

    def __init__(
        self,
        folder: Path,
        title: str = "runs",
        exclude: Path | None = None,
        on_pick: Callable[[Path], None] | None = None,
    ) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.title_text = title
        self.exclude = exclude
        self.on_pick = on_pick
        self.paths: list[Path] = []

    def compose(self) -> ComposeResult:
        yield Static(id="picker-title")
        yield ViewTable(id="picker-table")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one("#picker-table").focus()

    def action_reload(self) -> None:
        try:
            runs = collect_runs(self.folder)
        except MlaprofError as e:
            runs = []
            self.notify(str(e), severity="error")
        runs = [
            r for r in runs if self.exclude is None or r.path.resolve() != self.exclude.resolve()
        ]
        self.paths = [r.path for r in runs]
        self.query_one("#picker-title", Static).update(
            f"[b]{self.title_text}[/b] in {self.folder} ({len(runs)}, newest first); enter opens"
        )
        head = ["run", "created", "scenario", "device", "backend", "status", "steps"]
        rows = [
            [r.name, r.created[:19], r.scenario, r.device, r.backend, r.status, str(r.steps)]
            for r in runs
        ]
        self.query_one("#picker-table", ViewTable).show(
            (head, rows), keys=[str(p) for p in self.paths]
        )

    def on_view_table_selected(self, event: ViewTable.Selected) -> None:
        event.stop()
        if event.key is None:
            return
        path = Path(event.key)
        if self.on_pick is not None:
            self.on_pick(path)
        else:
            self.dismiss(path)

    def action_cancel(self) -> None:
        if self.on_pick is not None:
            self.app.exit()
        else:
            self.dismiss(None)

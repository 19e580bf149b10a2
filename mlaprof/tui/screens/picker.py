"""Run picker: the runs of a folder, newest first, with scenario, device and status."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from mlaprof.errors import MlaprofError
from mlaprof.store import list_runs_nested
from mlaprof.textsafe import term
from mlaprof.tui.widgets.table import ViewTable


class PickerScreen(Screen[Path | None]):
    HELP_TITLE = "run list"
    HELP = (
        ("up / down", "move in the list"),
        ("enter / click", "open the selected run"),
        ("g", "reload the list"),
        ("escape", "back (quit when this is the first screen)"),
    )
    BINDINGS = [
        Binding("escape", "cancel", "Back"),
        Binding("g", "reload", "Reload"),
    ]

    def __init__(
        self,
        folder: Path,
        title: str = "",
        exclude: Path | None = None,
        on_pick: Callable[[Path], None] | None = None,
    ) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.title_text = title
        self.exclude = exclude
        self.on_pick = on_pick
        self.paths: list[Path] = []
        self.head: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="picker-title")
        yield ViewTable(id="picker-table")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()
        self.query_one("#picker-table").focus()

    def action_reload(self) -> None:
        try:
            runs = list_runs_nested(self.folder)
        except MlaprofError as e:
            runs = []
            self.notify(str(e), severity="error")
        runs = [
            r for r in runs if self.exclude is None or r.path.resolve() != self.exclude.resolve()
        ]
        self.paths = [r.path for r in runs]
        self.query_one("#picker-title", Static).update(
            f"[b]{term(self.title_text or 'runs')}[/b]: {len(runs)} in {term(self.folder)}, newest first; "
            "enter opens"
        )
        # the run, then its key columns whole at 80 columns (steps, device, policy: a policy
        # name cut at the edge reads as another version); the rest scrolls
        head = ["run", "steps", "device", "policy", "status", "min_kv_mode", "backend"]
        head += ["scenario", "created"]
        self.head = head
        rows = [
            [r.name, r.steps_text(), r.device or "-", r.policy or "-", r.status]
            + [
                r.min_kv_mode or "-",
                r.backend or "-",
                r.scenario or "-",
                r.created[:16].replace("T", " "),
            ]
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

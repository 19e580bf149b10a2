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
from mlaprof.tui.widgets.table import GAP, ViewTable

# the run, then its key columns (wide screens); where that does not fit, what tells runs apart;
# last, why a run is unreadable (the reason ``runs`` and ``tui --once`` give: RunInfo.error), in
# a column of its own so that one long reason pushes no other column off the screen
FULL_ORDER = ("run", "steps", "device", "policy", "status", "min_kv_mode", "backend", "scenario",
              "created", "reason")  # fmt: skip
KEY_COLUMNS = 6  # run, steps, device, policy, status, min_kv_mode
NARROW_ORDER = ("status", "min_kv_mode", "policy", "steps", "device", "run", "backend",
                "scenario", "created", "reason")  # fmt: skip


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
        select: Path | None = None,
    ) -> None:
        super().__init__()
        self.folder = Path(folder)
        self.title_text = title
        self.exclude = exclude
        self.select = select  # the run the cursor starts on (the comparison in place)
        self.on_pick = on_pick
        self.paths: list[Path] = []
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self.narrow = False
        self._ready = False

    def compose(self) -> ComposeResult:
        yield Static(id="picker-title")
        yield ViewTable(id="picker-table")
        yield Static(id="picker-detail")
        yield Footer()

    def on_mount(self) -> None:
        self._ready = True
        self.action_reload()
        table = self.query_one("#picker-table", ViewTable)
        if self.select is not None:
            at = [p.resolve() for p in self.paths]
            if self.select.resolve() in at:
                table.move_cursor(at.index(self.select.resolve()))
        self.watch(table, "cursor_row", self._show_detail, init=False)
        table.focus()

    def on_resize(self) -> None:
        self._show()

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
        self.rows = [
            [r.name, r.steps_text(), r.device or "-", r.policy or "-", r.status]
            + [
                r.min_kv_mode or "-",
                r.backend or "-",
                r.scenario or "-",
                r.created[:16].replace("T", " "),
                r.error or "",
            ]
            for r in runs
        ]
        self._show()

    def _show(self) -> None:
        """The run, then its key columns; where that does not fit the screen (long names at
        80 columns), the columns that tell a bug run from its fix first, whole (status,
        min_kv_mode, policy: a policy cut at the edge reads as another version; steps, device),
        the run's name after them and whole on the line below the table for the cursor's run."""
        if not self._ready:  # a resize before the first load: nothing to lay out yet
            return
        key = FULL_ORDER[:KEY_COLUMNS]  # these must read whole; backend and the rest scroll
        need = (
            1
            + sum(
                max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
                for i, h in enumerate(key)
            )
            + GAP * (len(key) - 1)
        )
        self.narrow = need > self.app.size.width
        order = [FULL_ORDER.index(h) for h in (NARROW_ORDER if self.narrow else FULL_ORDER)]
        why = FULL_ORDER.index("reason")
        if not any(r[why] for r in self.rows):  # every run readable: no empty column
            order.remove(why)
        self.head = [FULL_ORDER[i] for i in order]
        rows = [[r[i] for i in order] for r in self.rows]
        self.query_one("#picker-table", ViewTable).show(
            (self.head, rows), keys=[str(p) for p in self.paths]
        )
        self.query_one("#picker-detail", Static).display = self.narrow and bool(self.rows)
        self._show_detail()

    def _show_detail(self) -> None:
        if not (self.narrow and self.rows):
            return
        row = self.query_one("#picker-table", ViewTable).cursor_row
        cells = self.rows[min(row, len(self.rows) - 1)]
        run, backend, device, scenario, created, reason = (
            term(cells[FULL_ORDER.index(h)])
            for h in ("run", "backend", "device", "scenario", "created", "reason")
        )
        self.query_one("#picker-detail", Static).update(
            f"[b]{run}[/b]  {backend} on {device}  {scenario}  {created}"
            + (f"\n{reason}" if reason else "")
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

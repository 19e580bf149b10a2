"""The dashboard application and ``run_app``, the entry the CLI (``mlaprof tui``, ``mlaprof run
--live``) calls."""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from mlaprof.errors import MlaprofError
from mlaprof.store import is_run_folder
from mlaprof.tui.screens.dashboard import DashboardScreen
from mlaprof.tui.screens.help import HelpScreen
from mlaprof.tui.screens.picker import PickerScreen


class MlaprofApp(App[int]):
    CSS_PATH = "mlaprof.tcss"
    TITLE = "mlaprof"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(
        self,
        path: Path,
        compare: Path | None = None,
        rank: int | None = None,
        interval: float = 0.25,
        traces: Path | None = None,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.compare = compare
        self.rank = rank
        self.interval = interval
        self.traces = traces  # the folder `mlaprof runs` lists (the compare chooser's runs)

    def on_mount(self) -> None:
        if is_run_folder(self.path):
            self.push_screen(self.dashboard(self.path))
        else:
            self.push_screen(PickerScreen(self.path, on_pick=self.open_run))

    def dashboard(self, path: Path) -> DashboardScreen:
        return DashboardScreen(path, self.compare, self.rank, self.interval)

    def open_run(self, path: Path) -> None:
        self.push_screen(self.dashboard(path))

    def action_help(self) -> None:
        screen = self.screen
        if not isinstance(screen, HelpScreen):
            title = getattr(screen, "HELP_TITLE", type(screen).__name__)
            self.push_screen(HelpScreen(title, getattr(screen, "HELP", ())))

    def action_back(self) -> None:
        if len(self.screen_stack) > 2:
            self.pop_screen()


def run_app(
    path: Path,
    once: bool = False,
    compare: Path | None = None,
    rank: int | None = None,
    traces: Path | None = None,
) -> int:
    """Open the dashboard on a run (followed live while it is written) or a folder of runs.

    ``once`` prints a plain-text snapshot of the main screen instead (no terminal needed).
    """
    path = Path(path)
    if once:
        from mlaprof.tui.once import snapshot

        print(snapshot(path, compare=compare, rank=rank), end="")
        return 0
    app = MlaprofApp(path, compare=compare, rank=rank, traces=traces)
    app.run()
    return app.return_code or 0


__all__ = ["MlaprofApp", "MlaprofError", "run_app"]

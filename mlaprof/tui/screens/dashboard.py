"""Main screen: follows one run and shows every panel; Enter on a layer drills down."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Tab, Tabs

from mlaprof.tui.follower import RunFollower, follow
from mlaprof.tui.messages import DrillDown, RunProblem, SummaryUpdated
from mlaprof.tui.text import LAYER_COLUMNS, empty_findings_ok, empty_findings_text
from mlaprof.tui.view import Selection, View

if TYPE_CHECKING:
    from mlaprof.analysis.live import LiveSummary
from mlaprof.tui.widgets.banner import ProblemBanner
from mlaprof.tui.widgets.capture import CapturePanel
from mlaprof.tui.widgets.details import DetailsPanel
from mlaprof.tui.widgets.findings import FindingsList
from mlaprof.tui.widgets.header import RunHeader
from mlaprof.tui.widgets.latency import LatencyPanel
from mlaprof.tui.widgets.layers import LayersTable
from mlaprof.tui.widgets.padding import PaddingTable
from mlaprof.tui.widgets.splits import SplitsTable

PANELS = (
    ("layers", "Layers"),
    ("findings", "Findings"),
    ("splits", "KV splits"),
    ("padding", "Padding"),
    ("capture", "Capture"),
    ("details", "Engine / import"),  # only for engine runs, imported traces and vLLM logs
)
NARROW_WIDTH, NARROW_HEIGHT = 120, 36


class DashboardScreen(Screen):
    HELP_TITLE = "dashboard"
    HELP = (
        ("up / down", "move in the layer table (focused when a run opens)"),
        ("enter / click", "drill down into the selected layer: its syncs, op and source line"),
        ("p / space", "pause / resume following (new records wait)"),
        ("[  ]", "step back / forward: the layer table shows one step"),
        ("a", "back to all steps (the analysis' layer table of the run)"),
        ("r", "rank: all ranks side by side (never merged), then each rank"),
        ("s / click header", "sort the layer table (again: reverse)"),
        ("c", "compare with another run side by side (bug vs fix)"),
        ("e", "export the run (Perfetto / rocpd / CSV) to ./out/"),
        ("w", "what if: modelled collapse and slowdown around this run's configuration"),
        (
            "1-6 / tab",
            "panel (narrow terminals): layers, findings, KV splits, padding, capture, "
            "engine / import (6: engine runs and imports)",
        ),
        ("escape", "back to the run list (when opened from one)"),
    )
    BINDINGS = [
        Binding("p,space", "toggle_pause", "Pause"),
        # the footer shows the keys a newcomer needs first; ? lists every key
        Binding("left_square_bracket", "step(-1)", "Step ◀", show=False),
        Binding("right_square_bracket", "step(1)", "Step ▶", show=False),
        Binding("a", "all_steps", "All steps", show=False),
        Binding("enter", "drill", "Drill down"),
        Binding("r", "next_rank", "Rank", show=False),
        Binding("s", "cycle_sort", "Sort", show=False),
        Binding("c", "compare", "Compare"),
        Binding("e", "export", "Export"),
        Binding("w", "whatif", "What if", show=False),
        Binding("tab", "next_panel", "Panel", show=False),
        *[
            Binding(str(i + 1), f"panel('{pid}')", title, show=False)
            for i, (pid, title) in enumerate(PANELS)
        ],
    ]

    def __init__(
        self,
        path: Path,
        compare: Path | None = None,
        rank: int | None = None,
        interval: float = 0.25,
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.compare_path = compare
        self.follower = RunFollower(self.path)
        self.sel = Selection(rank=rank)
        self.interval = interval
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.updates = 0  # refreshes drawn (tests wait on it)
        self.view: View | None = None
        self.live: LiveSummary | None = None  # the update worker's latest summary
        self.problem: str | None = None
        self.active_panel = "layers"

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield RunHeader(id="header")
        yield ProblemBanner(id="banner")
        yield LatencyPanel(id="latency")
        tabs = Tabs(*[Tab(title, id=f"tab-{pid}") for pid, title in PANELS], id="panel-tabs")
        tabs.can_focus = False  # 1-6 / tab switch panels; focus stays on the data
        yield tabs
        with Container(id="panels"):
            yield LayersTable(id="layers", classes="panel -active")
            yield FindingsList(id="findings", classes="panel")
            yield SplitsTable(id="splits", classes="panel")
            yield PaddingTable(id="padding", classes="panel")
            yield CapturePanel(id="capture", classes="panel")
            yield DetailsPanel(id="details", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        titles = dict(PANELS)
        for pid, _ in PANELS:
            w = self.query_one(f"#{pid}")
            if pid not in ("layers", "splits", "padding", "capture"):  # those title themselves
                w.border_title = titles[pid]
        self.query_one("#banner", ProblemBanner).show(None)
        self.query_one("#panel-tabs", Tabs).hide("tab-details")  # until the run has details
        self._layout(self.app.size.width, self.app.size.height)
        self.query_one("#layers").focus()  # arrows move in the layer table from the start
        self._follow()

    def on_unmount(self) -> None:
        self.stop.set()

    def on_resize(self, event: Resize) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        self.set_class(width < NARROW_WIDTH or height < NARROW_HEIGHT, "-narrow")

    # -- following -----------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="follow")
    def _follow(self) -> None:
        def post(msg: SummaryUpdated | RunProblem) -> None:
            if not self.stop.is_set():
                try:
                    self.app.call_from_thread(self.post_message, msg)
                except RuntimeError:  # the app is shutting down
                    self.stop.set()

        follow(
            self.follower,
            on_update=lambda live: post(SummaryUpdated(live)),
            on_problem=lambda text: post(RunProblem(text)),
            stop=self.stop,
            paused=self.paused,
            interval=self.interval,
        )

    def on_summary_updated(self, message: SummaryUpdated) -> None:
        self.live = message.live  # the newest summary replaces the one before
        self.problem = None
        try:
            self.refresh_views()
        except Exception as e:  # one odd record must not take the dashboard down
            self.log.error("refresh failed", e)
            self.on_run_problem(RunProblem(f"cannot draw this run: {type(e).__name__}: {e}"))

    def on_run_problem(self, message: RunProblem) -> None:
        self.problem = message.text
        self.query_one("#banner", ProblemBanner).show(message.text)

    def follow_state(self) -> str:
        if self.problem:
            return "unreadable"
        if self.paused.is_set():
            return "paused"
        if self.view and self.view.status == "finished":
            return "finished (replay)"
        return "live" if self.view is None else self.view.status

    def refresh_views(self) -> None:
        """Draw the current state: what one refresh costs (see bench/tui_bench.py)."""
        v = self.follower.selected_view(self.sel, self.live)
        self.view = v
        self.query_one("#header", RunHeader).show(v, self.follow_state())
        self.query_one("#banner", ProblemBanner).show(self.problem or v.problem)
        self.query_one("#latency", LatencyPanel).show(v)
        self.query_one("#layers", LayersTable).show_view(v)
        self.query_one("#splits", SplitsTable).show_view(v)
        self.query_one("#padding", PaddingTable).show_view(v)
        self.query_one("#capture", CapturePanel).show_view(v)
        self._show_details(self.query_one("#details", DetailsPanel).show_view(v))
        self.query_one("#findings", FindingsList).show(
            v.findings, v.findings_source, empty_findings_text(v), empty_findings_ok(v)
        )
        self.updates += 1

    def _show_details(self, shown: bool) -> None:
        """The engine / import panel exists only for runs the analysis has such sections for."""
        if self.has_class("-details") == shown:
            return
        self.set_class(shown, "-details")
        tabs = self.query_one("#panel-tabs", Tabs)
        (tabs.show if shown else tabs.hide)("tab-details")

    # -- panels (narrow terminals show one at a time) -----------------------------------------
    @on(Tabs.TabActivated, "#panel-tabs")
    def _tab(self, event: Tabs.TabActivated) -> None:
        self._show_panel(event.tab.id.removeprefix("tab-"))

    def _show_panel(self, pid: str) -> None:
        self.active_panel = pid
        for p, _ in PANELS:
            self.query_one(f"#{p}").set_class(p == pid, "-active")
        tabs = self.query_one("#panel-tabs", Tabs)
        if tabs.active != f"tab-{pid}":
            tabs.active = f"tab-{pid}"

    def _panels(self) -> list[str]:
        return [p for p, _ in PANELS if p != "details" or self.has_class("-details")]

    def action_panel(self, pid: str) -> None:
        if pid not in self._panels():
            self.notify("no engine or imported-trace details in this run")
            return
        self._show_panel(pid)
        self.query_one(f"#{pid}").focus()

    def action_next_panel(self) -> None:
        ids = self._panels()
        self.action_panel(ids[(ids.index(self.active_panel) + 1) % len(ids)])

    # -- actions -------------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        if self.paused.is_set():
            self.paused.clear()
            self.notify("following again")
        else:
            self.paused.set()
            self.notify("paused: the display is frozen; p resumes")
        if self.view is not None:
            self.query_one("#header", RunHeader).show(self.view, self.follow_state())

    def action_step(self, delta: int) -> None:
        ids = self.follower.step_ids(self.sel.rank)
        if not ids:
            self.notify("no steps yet")
            return
        if self.sel.step_index is None:
            self.sel.step_index = len(ids) - 1 if delta < 0 else 0
        else:
            self.sel.step_index = max(0, min(len(ids) - 1, self.sel.step_index + delta))
        self.refresh_views()

    def action_all_steps(self) -> None:
        self.sel.step_index = None
        self.refresh_views()

    def action_next_rank(self) -> None:
        ranks = self.follower.ranks
        if len(ranks) < 2:
            self.notify("single-rank run")
            return
        order: list[int | None] = [None, *ranks]
        self.sel.rank = order[(order.index(self.sel.rank) + 1) % len(order)]
        self.refresh_views()

    def sort_layers(self, column: str) -> None:
        key, rev = self.sel.layer_sort
        self.sel.layer_sort = (column, not rev) if key == column else (column, column != "layer")
        self.refresh_views()

    def action_cycle_sort(self) -> None:
        names = [c for c, _ in LAYER_COLUMNS]
        key, _ = self.sel.layer_sort
        self.sort_layers(names[(names.index(key) + 1) % len(names)])

    def action_drill(self) -> None:
        table = self.query_one("#layers", LayersTable)
        if self.view and self.view.layers:
            row = self.view.layers[min(table.cursor_row, len(self.view.layers) - 1)]
            self.open_layer(row.layer)

    def on_drill_down(self, message: DrillDown) -> None:
        self.open_layer(message.layer)

    def open_layer(self, layer: int) -> None:
        from mlaprof.tui.screens.layer import LayerScreen

        self.app.push_screen(LayerScreen(self.follower, self.sel, layer))

    def action_compare(self) -> None:
        from mlaprof.tui.screens.compare import CompareScreen
        from mlaprof.tui.screens.picker import PickerScreen

        # `c` always opens the chooser (the comparison can be changed; enter keeps the one in
        # place, the cursor starts on it), over every run the picker or `mlaprof runs` lists,
        # not only the run's own folder
        def chosen(path: Path | None) -> None:
            if path is not None:
                self.compare_path = path
                self.app.push_screen(CompareScreen(self.follower, path))

        now = f" (now: {self.compare_path.name})" if self.compare_path is not None else ""
        self.app.push_screen(
            PickerScreen(
                compare_root(
                    self.path, getattr(self.app, "path", None), getattr(self.app, "traces", None)
                ),  # fmt: skip
                title=f"compare {self.path.name} with another run{now}",
                exclude=self.path,
                select=self.compare_path,
            ),
            chosen,
        )

    def action_export(self) -> None:
        self._export()

    def action_whatif(self) -> None:
        from mlaprof.tui.screens.whatif import WhatIfScreen

        self.app.push_screen(WhatIfScreen(dict(self.follower.meta)))

    @work(thread=True, group="export")
    def _export(self) -> None:
        from mlaprof.tui.export import export_run

        ok, text = export_run(self.path)
        self.app.call_from_thread(self.notify, text, severity="information" if ok else "warning")


def compare_root(run: Path, opened: Path | None, traces: Path | None) -> Path:
    """The folder whose runs the compare chooser lists: the folder the app was opened on, else
    the traces folder `mlaprof runs` lists (``traces``, from the command) when the run lies in
    it (runs one folder down included), else the run's own folder."""
    if opened is not None and opened.resolve() != run.resolve() and opened.is_dir():
        return opened
    if traces is not None:
        with contextlib.suppress(OSError, ValueError):
            run.resolve().relative_to(traces.resolve())
            return traces
    return run.parent

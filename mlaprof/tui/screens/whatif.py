"""What if: the modelled split grid around the run's configuration (its model, spec tokens,
policy, device), worst cells first. The grid is computed by :mod:`mlaprof.whatif` in a worker
thread; this screen only formats its rows."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from mlaprof.tui.screens import still_open
from mlaprof.tui.widgets.table import ViewTable

TOP = 40
# short heads so every column fits 80 columns; the legend under the title spells them out
HEAD = ["B+pad", "KV", "S bug", "S fix", "S frz", "occ b", "occ f", "t us", "bug x", "frozen x"]
LEGEND = (
    "B+pad: requests + padding rows; S frz: S frozen at capture; occ b/f: occupancy with the "
    "bug / the fix; t us: time with the fix; bug x, frozen x: slowdown vs the fix"
)


def _f(v: Any, fmt: str) -> str:
    return "-" if v is None or v != v else fmt.format(v)


def _kv(tokens: int) -> str:
    """KV tokens, in k when a whole number of 1024 (131072 -> 128k)."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else str(tokens)


def rows(worst: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            f"{r['batch']}+{r['padding_rows']}",
            _kv(r["context"])
            if r["kv_min"] == r["kv_max"]
            else f"{_kv(r['kv_min'])}..{_kv(r['kv_max'])}",
            str(r["S_bug"] or "n/a"),
            str(r["S_fix"] or "n/a"),
            str(r["S_frozen"] or "-"),
            _f(r["occupancy_bug"], "{:.0%}"),
            _f(r["occupancy_fix"], "{:.0%}"),
            _f(r["t_fix_us"], "{:.0f}"),
            _f(r["slowdown_bug"], "{:.2f}"),
            _f(r["slowdown_frozen"], "{:.2f}"),
        ]
        for r in worst
    ]


class WhatIfScreen(Screen):
    HELP_TITLE = "what if"
    HELP = (
        ("up / down", "move in the grid of modelled cells (worst first)"),
        ("escape / w", "back to the dashboard"),
    )
    BINDINGS = [Binding("escape,w", "app.pop_screen", "Back")]

    def __init__(self, meta: dict[str, Any]) -> None:
        super().__init__()
        sc = meta.get("scenario")
        self.scenario = sc if isinstance(sc, dict) else {}
        self.result: Any = None

    def compose(self) -> ComposeResult:
        yield Static("[b]what if[/b]  computing the modelled grid ...", id="whatif-title")
        yield ViewTable(id="whatif-table")
        yield Static(LEGEND, id="whatif-legend", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        if not {"model", "policy", "target"} <= set(self.scenario):
            self.query_one("#whatif-title", Static).update(
                "[b]what if[/b]  this run has no scenario (model, policy, device) to model: "
                "an imported trace? Use `mlaprof whatif` with the shapes you serve."
            )
            return
        self._compute()

    @work(thread=True, group="whatif")
    def _compute(self) -> None:
        from mlaprof.whatif.grid import grid_for_scenario

        w = grid_for_scenario(self.scenario)
        try:
            self.app.call_from_thread(self._show, w)
        except RuntimeError:  # the app closed meanwhile
            return

    def _show(self, w: Any) -> None:
        if not still_open(self):
            return  # the grid finished after the screen closed, or while it closed
        self.result = w
        sc = self.scenario
        first = w.records(w.worst_index(1))[0]
        self.query_one("#whatif-title", Static).update(
            f"[b]what if[/b]  modelled for {sc['model']} ({first['heads']} heads), qlen "
            f"{first['qlen']}, policy {sc['policy']}, device {sc['target']}: {len(w):,} cells, "
            f"[red]{w.count('collapsed')}[/red] collapse with the padding bug, "
            f"{w.count('frozen_collapsed')} frozen at capture\n"
            f"[dim]time: {first['time_model']}; worst {TOP} cells first[/dim]"
        )
        self.query_one("#whatif-table", ViewTable).show((HEAD, rows(w.worst_rows(TOP))))

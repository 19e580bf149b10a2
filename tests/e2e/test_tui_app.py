"""Pilot tests: navigation, drill-down, compare, picker, live append, a run broken while followed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Tabs

from mlaprof import export_targets
from mlaprof.analysis import summary
from mlaprof.analysis.diff import fmt_value
from mlaprof.analysis.live import LiveFold
from mlaprof.store import create_run, load, runmeta
from mlaprof.synthetic.dashboard import make_run, meta, write_step
from mlaprof.tui import export
from mlaprof.tui.app import MlaprofApp
from mlaprof.tui.screens.compare import CompareScreen
from mlaprof.tui.screens.dashboard import DashboardScreen
from mlaprof.tui.screens.help import HelpScreen
from mlaprof.tui.screens.layer import LayerScreen
from mlaprof.tui.screens.picker import PickerScreen
from mlaprof.tui.screens.whatif import WhatIfScreen
from mlaprof.tui.widgets.banner import ProblemBanner
from mlaprof.tui.widgets.table import ViewTable

# a guard against a hang, never a result: every wait below is for an event (a screen, a count, a
# file), which a loaded machine only delays
HANG_S = 600.0


async def wait_for(pilot: Pilot, cond: Callable[[], bool], timeout: float = HANG_S) -> None:
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"condition not met in {timeout:.0f} s (a hang)")


def dash(app: MlaprofApp) -> DashboardScreen:
    assert isinstance(app.screen, DashboardScreen)
    return app.screen


async def loaded(pilot: Pilot, steps: int | None = None) -> DashboardScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, DashboardScreen) and app.screen.updates)
    d = dash(app)
    if steps is not None:
        await wait_for(pilot, lambda: d.view is not None and d.view.steps == steps)
    return d


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    make_run(tmp_path, "bug", steps=6, layers=3)
    make_run(tmp_path, "fix", steps=6, layers=3, bug=False)
    return tmp_path


async def test_steps_sort_and_drill_down(runs: Path) -> None:
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        d = await loaded(pilot, steps=6)
        assert d.view.layer_scope == "all steps"
        assert "finished" in d.follow_state()
        await pilot.press("right_square_bracket")
        assert d.view.layer_scope == "step 0"
        await pilot.press("right_square_bracket", "right_square_bracket", "left_square_bracket")
        assert d.view.layer_scope == "step 1"
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert d.view.layer_scope == "step 0"  # clamps at the first step
        await pilot.press("a")
        assert d.view.layer_scope == "all steps"
        # sort: s cycles the column; time descending puts the slowest layer first
        await pilot.press("s")
        assert d.sel.layer_sort == ("time_us", True)
        assert [r.layer for r in d.view.layers] == [2, 1, 0]
        # click on the "layer" header sorts by layer again
        d.sort_layers("layer")
        assert [r.layer for r in d.view.layers] == [0, 1, 2]
        # drill down into the layer under the cursor
        table = app.screen.query_one("#layers", ViewTable)
        table.focus()
        table.move_cursor(row=1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LayerScreen))
        layer = app.screen
        assert layer.layer_no == 1
        syncs = layer.query_one("#layer-syncs", ViewTable)
        ops = {syncs.get_row_at(i)[1] for i in range(syncs.row_count)}
        locs = {syncs.get_row_at(i)[2] for i in range(syncs.row_count)}
        assert ops == {"aten._local_scalar_dense", "Tensor.tolist"}
        assert locs == {"mla/legacy.py:100", "mla/legacy.py:110"}
        await pilot.press("right_square_bracket")
        assert layer.layer_no == 2
        await pilot.press("escape")
        assert app.screen is d
        # mouse: a click moves the cursor to a row, a second click on it drills down
        await pilot.click(table, offset=(4, 2))  # border, header, then the first row
        assert table.cursor_row == 0
        await pilot.click(table, offset=(4, 2))
        await wait_for(pilot, lambda: isinstance(app.screen, LayerScreen))
        assert app.screen.layer_no == 0
        await pilot.press("escape")
        # a click on a header sorts by that column
        await pilot.click(table, offset=(10, 1))
        assert d.sel.layer_sort[0] == "time_us"


async def test_narrow_terminal_shows_one_panel(runs: Path) -> None:
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        d = await loaded(pilot, steps=6)
        assert d.has_class("-narrow")
        assert app.screen.query_one("#layers").display
        assert app.screen.query_one("#findings").styles.display == "none"
        await pilot.press("2")
        assert app.screen.query_one("#findings").has_class("-active")
        assert not app.screen.query_one("#layers").has_class("-active")
        assert app.screen.query_one("#panel-tabs", Tabs).active == "tab-findings"
        await pilot.press("tab")
        assert d.active_panel == "splits"
        await pilot.resize_terminal(160, 48)
        await pilot.pause(0.1)
        assert not d.has_class("-narrow")


async def test_the_capture_panel_shows_the_reports_capture_section(runs: Path) -> None:
    """The live dashboard's capture panel holds the rows layer's capture block, the report's
    capture section (tests/unit/test_tui_capture_section.py holds --once to the report)."""
    from textual.widgets import Static

    from mlaprof.reporters.rows import summary_blocks
    from mlaprof.tui.widgets.capture import CapturePanel

    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        d = await loaded(pilot, steps=6)
        await wait_for(pilot, lambda: d.view is not None and not d.view.provisional)
        panel = app.screen.query_one("#capture", CapturePanel)
        assert d.view.summary is not None
        (block,) = [b for b in summary_blocks(d.view.summary) if b.key == "capture"]
        shown = str(panel.query_one("#capture-text", Static).render())
        assert shown.splitlines() == [f"{r.label}: {r.text}" for r in block.rows]
        assert panel.border_title == "Capture"


async def test_pause_and_live_append(tmp_path: Path) -> None:
    w = create_run(tmp_path, "live", meta("live", True))  # no steps yet: the app must wait
    app = MlaprofApp(tmp_path / "live", interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        d = await loaded(pilot)
        assert d.view.steps == 0
        write_step(w, 0, 2, True)
        await wait_for(pilot, lambda: d.view.steps == 1)
        await pilot.press("p")
        assert d.follow_state() == "paused"
        write_step(w, 1, 2, True)
        await pilot.pause(0.4)
        assert d.view.steps == 1  # frozen while paused
        await pilot.press("p")
        await wait_for(pilot, lambda: d.view.steps == 2)
        assert sorted(r.layer for r in d.view.layers) == [0, 1]
        w.finish()
        await wait_for(pilot, lambda: d.view.status == "finished")


async def test_run_deleted_while_followed(tmp_path: Path) -> None:
    p = make_run(tmp_path, "doomed", steps=3)
    app = MlaprofApp(p, interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        d = await loaded(pilot, steps=3)
        shutil.rmtree(p)
        banner = app.screen.query_one("#banner", ProblemBanner)
        await wait_for(pilot, lambda: banner.display and d.problem is not None)
        assert "deleted" in d.problem
        assert d.follow_state() == "unreadable"
        assert d.view.steps == 3  # what was read stays on screen


async def test_a_run_abandoned_before_its_first_record_reads_as_report_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # run.json, no database, no writer: the dashboard said "waiting for the first records"
    from mlaprof.cli import main

    p = runmeta.init_run_dir(tmp_path, "empty", {"source": "test"})
    assert main(["report", str(p)]) == 2
    said = capsys.readouterr().err.strip().removeprefix("mlaprof: error: ")
    assert "abandoned" in said
    app = MlaprofApp(p, interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        d = await loaded(pilot)  # drawn after its first poll, which judged the folder
        banner = app.screen.query_one("#banner", ProblemBanner)
        assert d.view is not None and d.view.status == d.follow_state() == "abandoned"
        assert banner.display and banner.content == f"! {said}"
        assert d.query_one("#header").content.plain.split()[0] == "abandoned"


async def test_multi_rank_selector(tmp_path: Path) -> None:
    p = make_run(tmp_path, "mr", steps=4, layers=2, ranks=2)
    app = MlaprofApp(p, interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        d = await loaded(pilot, steps=4)  # each rank's 4 steps, never summed into 8
        assert d.view.rank_label == "ranks 0-1" and {r.rank for r in d.view.layers} == {
            0,
            1,
        }
        await pilot.press("r")
        assert d.view.rank_label == "rank 0 of 2" and d.view.steps == 4
        assert {r.rank for r in d.view.layers} == {0}
        await pilot.press("r")
        assert d.view.rank_label == "rank 1 of 2"
        await pilot.press("r")
        assert d.view.rank_label == "ranks 0-1"


async def test_compare_side_by_side(runs: Path) -> None:
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, steps=6)
        await pilot.press("c")  # no --compare: pick the other run
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert [p.name for p in app.screen.paths] == ["fix"]  # the run itself is left out
        assert "compare bug with another run" in str(app.screen.query_one("#picker-title").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        table = app.screen.query_one("#compare-table", ViewTable)
        await wait_for(
            pilot,
            lambda: any(table.get_row_at(i)[0] == "capture" for i in range(table.row_count)),
        )
        rows = {table.get_row_at(i)[0]: table.get_row_at(i) for i in range(table.row_count)}
        # the diff of mlaprof.analysis.diff: the report's numbers and verdicts
        assert rows["sync / allocation sites in the region (count)"][1:] == [
            "2",
            "0",
            "-100%",
            "better",
        ]
        assert rows["capture"][1:3] == ["failed", "captured"]
        # the row's name carries its source's mark (the legend under the table says which)
        mem = next(
            k for k in rows if k.startswith("capture memory (driver free-memory delta) (MiB)")
        )
        # the failed FULL attempt measured no bytes (as the GPU runner records it): unknown
        with load(runs / "bug") as run:
            assert summary(run)["capture"]["memory_bytes"] is None
        with load(runs / "fix") as run:
            fixed = fmt_value(summary(run)["capture"]["memory_bytes"] / 2**20)
        assert rows[mem][2] == fixed and fixed != "-"
        # no figure on one side: no change and no verdict either
        assert rows[mem][1:] == ["-", fixed, "-", "n/a"], rows[mem]
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_a_compare_screen_being_closed_draws_nothing(runs: Path) -> None:
    """B's follower delivers its updates from a thread; one that arrived while the screen was
    being popped (it still read mounted, its widgets going) queried a widget already gone and
    failed the app (seen on CI under load). A compare screen that is no longer the app's screen
    draws nothing."""
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot, steps=6)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        table = compare.query_one("#compare-table", ViewTable)
        await wait_for(pilot, lambda: table.row_count > 0)
        closing = app.pop_screen()  # popped now, its widgets removed when awaited
        assert compare.is_mounted and compare not in app.screen_stack
        table.show(([], []))  # emptied: a draw would fill it again
        compare.draw()  # what a late update from B's follower runs
        assert table.row_count == 0
        await closing
        assert isinstance(app.screen, DashboardScreen)


async def test_the_compare_chooser_reopens_and_lists_every_run(tmp_path: Path) -> None:
    """`c` once reopened the first comparison for good, and listed only the run's own folder:
    it opens the chooser every time, over every run of the folder the app was opened on
    (one folder down included, as `mlaprof runs` lists), the run itself left out."""
    for name, bug in (("bug", True), ("fix", False), ("demo/other", False)):
        folder, _, leaf = name.rpartition("/")
        runmeta.update(make_run(tmp_path / folder, leaf, steps=3, layers=2, bug=bug),
                       created=f"2026-01-0{len(name) % 9 + 1}T10:00:00")  # fmt: skip
    app = MlaprofApp(tmp_path, interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        app.screen.on_pick(tmp_path / "bug")
        await loaded(pilot, steps=3)
        dashboard = app.screen
        for other in ("fix", "other"):
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
            chooser = app.screen
            assert sorted(p.name for p in chooser.paths) == ["fix", "other"]
            picked = next(i for i, p in enumerate(chooser.paths) if p.name == other)
            chooser.query_one("#picker-table", ViewTable).move_cursor(picked)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
            assert app.screen.b.path.name == other
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is dashboard)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        assert "(now: other)" in str(app.screen.query_one("#picker-title").render())


async def test_folder_opens_picker_newest_first(runs: Path) -> None:
    app = MlaprofApp(runs, interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        picker = app.screen
        assert [p.name for p in picker.paths] == ["fix", "bug"]
        table = picker.query_one("#picker-table", ViewTable)
        row = dict(zip(picker.head, table.get_row_at(0), strict=True))
        assert row["scenario"] == "dsv3-mtp3-fixed" and row["status"] == "finished"
        assert row["min_kv_mode"] == "active-rows" and row["backend"] == "triton"
        await pilot.press("down", "enter")
        d = await loaded(pilot, steps=6)
        assert d.path.name == "bug"
        await pilot.press("escape")
        assert app.screen is picker


async def test_the_picker_says_why_a_run_is_unreadable_as_the_listing_does(runs: Path) -> None:
    """The picker showed "unreadable" alone where ``runs`` and ``tui --once`` give the reason
    (:func:`mlaprof.store.reader.list_runs`)."""
    from mlaprof.store import list_runs

    (runs / "bug" / "run.json").unlink()  # a damaged run: rank databases, no run.json
    (info,) = [r for r in list_runs(runs) if r.name == "bug"]
    assert info.status == "unreadable" and info.error and "no run.json" in info.error
    assert info.status_text() == f"unreadable: {info.error}"  # what runs / tui --once print
    app = MlaprofApp(runs, interval=0.05)
    async with app.run_test(size=(400, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, PickerScreen))
        picker = app.screen
        table = picker.query_one("#picker-table", ViewTable)
        got = {
            r["run"]: r
            for r in (dict(zip(picker.head, table.get_row_at(i), strict=True))
                      for i in range(table.row_count))
        }  # fmt: skip
        assert got["bug"]["status"] == "unreadable" and got["bug"]["reason"] == info.error
        assert got["fix"]["reason"] == ""


async def test_export_goes_to_out_and_says_where(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot, steps=6)
        await pilot.press("e")
        await wait_for(pilot, lambda: (cwd / "out" / "bug.rocpd.db").exists())
    trace = json.loads((cwd / "out" / "bug.perfetto.json").read_text())
    assert trace["traceEvents"]
    assert not list(runs.glob("bug.*")) and not list(runs.glob("bug_csv"))  # not beside the run
    # a second export never overwrites, and names the folder it wrote to
    ok, text = export.export_run(runs / "bug")
    assert ok and "bug-2.perfetto.json" in text and str(cwd / "out") in text


def test_export_bug_is_reported_not_raised(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        export_targets, "FORMATS", {"x": ("mlaprof.no_such_module", "export_x", ".x")}
    )
    ok, text = export.export_run(runs / "bug", runs / "o")
    assert not ok and text.startswith("export failed; x failed (ModuleNotFoundError")


async def test_truncated_or_unexpected_records_show_a_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = create_run(tmp_path, "t", meta("t", True))
    for s in range(30):
        write_step(w, s, 3, True)
    app = MlaprofApp(tmp_path / "t", interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        d = await loaded(pilot, steps=30)

        def broken(*args: object) -> None:
            raise TypeError("odd record")

        # a record the aggregation does not expect: a message, the app keeps running
        monkeypatch.setattr(LiveFold, "add", broken)
        write_step(w, 30, 3, True)
        await wait_for(pilot, lambda: d.problem is not None)
        assert d.problem == "cannot follow t: TypeError: odd record"
        monkeypatch.undo()
        # the database cut short under the follower
        db = tmp_path / "t" / "rank0.db"
        w.finish()
        with open(db, "r+b") as fh:
            fh.truncate(db.stat().st_size // 4)
        await wait_for(pilot, lambda: d.problem is not None and "odd record" not in d.problem)
        assert app.screen.query_one("#banner", ProblemBanner).display
        assert d.view.steps >= 30


SCREENS = (DashboardScreen, LayerScreen, CompareScreen, PickerScreen, WhatIfScreen)


def test_every_screen_lists_each_of_its_keys_in_help() -> None:
    """The help text of a screen names every key bound on it."""
    from mlaprof.tui.screens.dashboard import PANELS
    from mlaprof.tui.screens.help import help_text

    shown_as = {"left_square_bracket": "[", "right_square_bracket": "]", "question_mark": "?"}

    for screen in SCREENS:
        text = help_text(screen.HELP_TITLE, screen.HELP)
        keys = {k.strip() for line in text.splitlines()[2:] for k in line[:20].split("/")}
        for b in screen.BINDINGS:
            for key in b.key.split(","):
                name = f"1-{len(PANELS)}" if key.isdigit() else shown_as.get(key, key)
                assert any(name in k for k in keys), (screen.__name__, key, text)


async def test_help_shows_the_keys_of_the_current_screen(runs: Path) -> None:
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        d = await loaded(pilot, steps=6)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = app.screen.text
        assert shown.startswith("dashboard: keys")
        for line in ("pause / resume following", "drill down", "compare with another run"):
            assert line in shown
        assert app.screen.query_one("#help-text").size.height > 10  # not an empty box
        await pilot.press("escape")
        assert app.screen is d
        d.open_layer(1)
        await wait_for(pilot, lambda: isinstance(app.screen, LayerScreen))
        await pilot.press("question_mark")
        shown = app.screen.text
        assert shown.startswith("layer drill-down: keys") and "previous / next layer" in shown


async def test_arrows_move_in_the_layer_table_on_open(runs: Path) -> None:
    app = MlaprofApp(runs / "bug", interval=0.05)
    async with app.run_test(size=(160, 48)) as pilot:
        d = await loaded(pilot, steps=6)
        table = d.query_one("#layers", ViewTable)
        assert app.focused is table
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, LayerScreen))
        assert app.screen.layer_no == 2


def test_live_exit_note_names_the_run(tmp_path: Path) -> None:
    from mlaprof.commands.run import live_exit_note

    assert live_exit_note(tmp_path / "r", False).startswith(f"run written to {tmp_path / 'r'}")
    assert "stopped early" in live_exit_note(tmp_path / "r", True)

"""Portable SQL: a query its caller marks as reading alike in SQLite and DuckDB runs in SQLite
where it names no columnar table and few rows (``mlaprof.store.sqlengine.in_sqlite``), so the
figures of a small recorded run need no DuckDB. Each portable query is checked here to give the
same frame, dtypes included, in both engines."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis import series
from mlaprof.store import create_run, load, sqlengine
from tests import shipped_demo
from tests.unit.test_import_rocprof import _process_trace

LONG = "k" * 300 + "<é>"  # past the timeline's shown length, not ASCII


def _recorded(tmp_path: Path) -> Path:
    """Two ranks of kernels in SQLite: NULL timestamps, equal start times, a long name."""
    for rank in (0, 1):
        w = create_run(tmp_path, "rec", {"source": "test", "ranks": 2}, rank=rank)
        w.add_many("steps", [{"step": s, "t_start_ns": 1000 * s, "duration_ns": 900}
                             for s in range(3)])  # fmt: skip
        rows = []
        for s in range(3):
            for j, name in enumerate(("b_stage2", "a_stage1", LONG)):
                t = 1000 * s + 10 * (j % 2)  # two kernels of a step start together
                rows.append({"step": s, "name": name, "start_ns": t, "end_ns": t + 5 + j + rank,
                             "stream": 7 - j})  # fmt: skip
        rows.append({"step": None, "name": "untimed", "start_ns": None, "end_ns": None})
        rows.append({"step": None, "name": "a_stage1", "start_ns": 50, "end_ns": 60})
        w.add_many("kernels", rows)
        w.finish()
    return tmp_path / "rec"


def _both(monkeypatch: pytest.MonkeyPatch, compute) -> tuple[object, object]:
    """``compute()`` in SQLite (the default for a small run), then in DuckDB (no row is few
    enough for SQLite)."""
    here = compute()
    monkeypatch.setattr(sqlengine, "SQLITE_ROWS", -1)
    return here, compute()


def test_kernels_per_rank_reads_alike_in_both_engines(tmp_path, monkeypatch) -> None:
    with load(_recorded(tmp_path)) as run:
        lite, duck = _both(monkeypatch, lambda: series._kernels_per_rank(run))
    assert sorted(lite) == [0, 1]
    for r in lite:
        pd.testing.assert_frame_equal(lite[r], duck[r])
    assert lite[0]["name"].tolist() == sorted(lite[0]["name"])  # untimed left out, byte order
    assert "untimed" not in set(lite[0]["name"])


def test_timeline_reads_alike_in_both_engines(tmp_path, monkeypatch) -> None:
    with load(_recorded(tmp_path)) as run:
        steps = run.table("steps")
        layers = run.table("layers")

        def both_ranks():
            return [series.timeline(run, r, steps[steps["rank"] == r], layers) for r in (0, 1)]

        lite, duck = _both(monkeypatch, both_ranks)
    assert lite == duck
    assert all(t is not None for t in lite)
    assert any(LONG[:20] in str(t) for t in lite)  # the long name shown, shortened


def test_engine_choice(tmp_path, monkeypatch) -> None:
    with load(_recorded(tmp_path)) as run:
        sources = [run._source(k) for k in run.databases]
        assert sqlengine.in_sqlite(sources, {"kernels", "steps"})
        monkeypatch.setattr(sqlengine, "SQLITE_ROWS", 2 * 11)  # 11 kernels a rank
        assert sqlengine.in_sqlite(sources, {"kernels"})
        assert not sqlengine.in_sqlite(sources, {"kernels", "steps"})  # 22 + 6 rows
        monkeypatch.setattr(sqlengine, "SQLITE_ROWS", 1000)
        monkeypatch.setattr(sqlengine, "attach_limit", lambda: 1)  # more ranks than it attaches
        assert not sqlengine.in_sqlite(sources, {"steps"})
        assert series._kernels_per_rank(run)[1]["count"].sum() == 10  # DuckDB answers instead
    # an import's kernels are a columnar file: DuckDB reads it, however few its rows
    out = tmp_path / "out" / "host"
    _process_trace(out / "100_kernel_trace.csv", replays=2, agent=5)
    from mlaprof.importers.rocprof import import_rocprof

    run_dir, _ = import_rocprof(tmp_path / "out", tmp_path / "t", "one")
    with load(run_dir) as run:
        sources = [run._source(k) for k in run.databases]
        assert not sqlengine.in_sqlite(sources, {"kernels"})
        assert sqlengine.in_sqlite(sources, {"steps"})


def test_figures_of_a_shipped_run_start_no_duckdb(monkeypatch) -> None:
    # the HTML report's figures (the series) of a recorded run: no query reaches DuckDB
    from mlaprof.analysis.run_summary import build_summary

    started = []
    monkeypatch.setattr(sqlengine, "duckdb_module", lambda: started.append(1) or sys.exit(9))
    with load(shipped_demo.folder() / shipped_demo.NAMES[0]) as run:
        s = build_summary(run, series=True)
    assert s.series is not None and s.series.ranks, "no series built"
    assert not started


def test_a_frames_kernel_sums_equal_the_runs_at_epoch_nanoseconds(tmp_path) -> None:
    """Kernel times at epoch nanoseconds (as profilers stamp them, ~1.75e18: float64 holds
    them 256 ns apart): the sums from a kernels frame handed over whole (a notebook's) equal the
    SQL's, which subtracts before it converts."""
    t0 = 1_750_000_000_000_000_000
    w = create_run(tmp_path, "epoch", {"source": "test"}, rank=0)
    w.add_many("kernels", [{"step": 0, "name": "mla", "start_ns": t0 + 1000 * i + 37,
                            "end_ns": t0 + 1000 * i + 37 + 2101} for i in range(5)])  # fmt: skip
    w.finish()
    with load(tmp_path / "epoch") as run:
        by_sql = series._kernels_per_rank(run)[0]
        by_frame = series._kernels_per_rank(None, run.table("kernels"))[0]
    assert by_sql["sum"].tolist() == [5 * 2101 / 1e3]
    assert by_frame["sum"].tolist() == by_sql["sum"].tolist()


def test_capture_phase_calls_read_alike_in_both_engines(tmp_path, monkeypatch) -> None:
    """The capture-phase calls of a whole-process trace (rocprofv3 7.x CSVs, two ranks' worth
    of the same capture phase): the same frame from SQLite (a small API table) and DuckDB,
    rows in start order per rank, and SQLite answers without loading DuckDB at all."""
    from mlaprof.analysis import capture_phase
    from mlaprof.cli import main
    from tests.conformance import render
    from tests.unit.test_capture_phase import whole_process

    tr, _ = whole_process(replays=2)
    path, _ = render(tr, "csv-7", tmp_path / "in")
    assert (
        main(["import", "rocprof", str(path), "--traces", str(tmp_path / "t"), "--name", "x"]) == 0
    )
    with load(tmp_path / "t" / "x") as run:
        started: list[int] = []
        real = sqlengine.duckdb_module
        monkeypatch.setattr(sqlengine, "duckdb_module", lambda: started.append(1) or real())
        lite = capture_phase._calls(run)
        assert not started, "a small API table was sent to DuckDB"
        monkeypatch.setattr(sqlengine, "SQLITE_ROWS", -1)
        duck = capture_phase._calls(run)
        assert started
    pd.testing.assert_frame_equal(lite, duck)
    assert lite["function"].tolist()[:3] == ["hipStreamBeginCapture", "hipStreamEndCapture",
                                             "hipGraphInstantiate"]  # fmt: skip
    assert lite["start_ns"].is_monotonic_increasing

"""Duplicates and holes are not data: a rocpd database whose dispatch rows all appear twice
(same id) and one whose dispatches name kernel symbols it lacks. The repeats are counted once
and both are named in the import's notes and in the trace's trust. The databases are the
conformance writer's (tests/conformance/rocpd.py, rocprofv3's schema), then damaged."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from mlaprof.analysis import summary as analysis_summary
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from tests.conformance.rocpd import write_rocpd
from tests.conformance.shapes import graph_replays

STEPS, LAYERS = 3, 4


@pytest.fixture(params=["adbc", "rows"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both dispatch readers: ADBC's columns and the row-by-row one."""
    if request.param == "rows":
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite.dbapi", None)
        monkeypatch.setitem(sys.modules, "adbc_driver_sqlite", None)
    return request.param


def _db(tmp_path: Path) -> tuple[Path, sqlite3.Connection, str]:
    db = write_rocpd(graph_replays(STEPS, LAYERS), tmp_path / "in" / "1_results.db", "3.0.1")
    con = sqlite3.connect(db, isolation_level=None)
    (table,) = con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_kernel_dispatch_%'"
    ).fetchone()
    return db, con, table


def _trust(run: Path) -> dict:
    with load(run) as r:
        return analysis_summary(r)["trace"]["trust"]


def test_dispatch_rows_written_twice_are_counted_once(tmp_path: Path, reader: str) -> None:
    clean, con, table = _db(tmp_path / "a")
    con.close()
    _, want = import_rocprof(clean, tmp_path / "t", "clean")
    db, con, table = _db(tmp_path / "b")
    con.execute("DROP VIEW rocpd_kernel_dispatch")
    con.execute(
        f'CREATE VIEW rocpd_kernel_dispatch AS SELECT * FROM "{table}" '
        f'UNION ALL SELECT * FROM "{table}"'
    )
    n = con.execute("SELECT COUNT(*) FROM rocpd_kernel_dispatch").fetchone()[0]
    con.close()
    run, got = import_rocprof(db, tmp_path / "t", "twice")
    assert got.layers == want.layers == STEPS * LAYERS  # 4 layers a step, not 8
    assert got.mla_kernels == want.mla_kernels
    with load(run) as r:
        assert r.count("kernels") == n // 2
    assert any(f"{n // 2} of {n} dispatch records repeat" in x for x in got.notes), got.notes
    trust = _trust(run)
    assert trust["counts"]["repeated_dispatches"] == n // 2
    assert any("repeated in the trace" in x for x in trust["notes"]), trust


def test_dispatches_without_their_symbol_are_named(tmp_path: Path, reader: str) -> None:
    db, con, _ = _db(tmp_path)
    (sym,) = con.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_info_kernel_symbol_%'"
    ).fetchone()
    ids = [r[0] for r in con.execute(f'SELECT id FROM "{sym}" ORDER BY id')]
    con.execute(f'DELETE FROM "{sym}" WHERE id = ?', (ids[0],))
    lost = con.execute(
        "SELECT COUNT(*) FROM rocpd_kernel_dispatch WHERE kernel_id = ?", (ids[0],)
    ).fetchone()[0]
    total = con.execute("SELECT COUNT(*) FROM rocpd_kernel_dispatch").fetchone()[0]
    con.close()
    assert lost
    run, got = import_rocprof(db, tmp_path / "t", "holes")
    assert any(f"{lost} of {total} dispatches name a kernel symbol" in x for x in got.notes)
    trust = _trust(run)
    assert trust["verdict"] == "unreliable" and trust["counts"]["nameless_dispatches"] == lost
    assert any(f"{lost} of {total} dispatches name a kernel symbol" in x for x in trust["reasons"])

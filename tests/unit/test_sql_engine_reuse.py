"""The SQL engine keeps one DuckDB database per process and runs each query on a cursor of its
own (opening a database costs about 23 ms, a cursor 0.2 ms): nothing one query registers is
seen by the next, and a forked child opens its own database. (How many queries a summary runs,
one per rank for the figures' timeline: tests/unit/test_summary_reads.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.errors import MlaprofError
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load, sqlengine
from tests.trace_io_helpers import DATA


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path_factory.mktemp("f"), "f")
    return run


def test_one_database_per_process_and_a_cursor_per_query(fleet: Path, monkeypatch) -> None:
    duckdb = sqlengine.duckdb_module()
    opened: list[object] = []
    real = duckdb.connect
    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: opened.append(1) or real(*a, **k))
    monkeypatch.setattr(sqlengine, "_SHARED", {})
    with load(fleet) as run:
        for _ in range(3):
            run.query("SELECT COUNT(*) AS n FROM kernels")
    assert len(opened) == 1


def test_a_querys_frames_and_views_go_with_its_cursor(fleet: Path) -> None:
    with load(fleet) as run:
        got = run.query(
            "SELECT SUM(x) AS s FROM mine", frames={"mine": pd.DataFrame({"x": [1, 2]})}
        )
        assert int(got["s"].iloc[0]) == 3
        with pytest.raises(MlaprofError, match="mine"):  # the next query does not see it
            run.query("SELECT SUM(x) AS s FROM mine")
        # nor the views over the store tables: each query builds its own over its ranks
        one = run.query("SELECT COUNT(*) AS n FROM kernels", ranks=(run.ranks[0],))
        every = run.query("SELECT COUNT(*) AS n FROM kernels")
        assert 0 < int(one["n"].sum()) < int(every["n"].iloc[0])
    db = sqlengine._cursor(sqlengine.duckdb_module())
    try:
        left = db.sql("SELECT table_name FROM information_schema.tables").fetchall()
    finally:
        db.close()
    assert left == []


def test_a_forked_child_opens_its_own_database(fleet: Path) -> None:
    with load(fleet) as run:
        run.query("SELECT 1 AS x")
        parent = sqlengine._SHARED[os.getpid()]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a query, then whether its database is the parent's
            try:
                n = int(run.query("SELECT COUNT(*) AS n FROM kernels")["n"].iloc[0])
                mine = sqlengine._SHARED.get(os.getpid())
                os.write(w, f"{n} {mine is not None and mine is not parent}".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        answer = os.read(r, 100).decode()
        os.close(r)
        assert int(run.query("SELECT COUNT(*) AS n FROM kernels")["n"].iloc[0]) == int(
            answer.split()[0]
        )
    assert answer.split()[1] == "True"


def test_the_retry_puts_the_memory_limit_back(fleet: Path, monkeypatch) -> None:
    """A query that meets the cap runs once more with the larger limit, then the database's
    limit is the bounded one again (it is a setting of the whole database)."""
    duckdb = sqlengine.duckdb_module()
    calls: list[str] = []

    class Cursor:
        def __init__(self, real):
            self.real = real

        def sql(self, q, params=None):
            limit = self.real.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
            calls.append(limit)
            if len(calls) == 1:
                raise duckdb.OutOfMemoryException("cap")
            return self.real.sql(q, params=params)

        def __getattr__(self, name):
            return getattr(self.real, name)

    real_cursor = sqlengine._cursor
    monkeypatch.setattr(sqlengine, "_cursor", lambda d: Cursor(real_cursor(d)))
    with load(fleet) as run:
        assert len(run.query("SELECT COUNT(*) AS n FROM kernels")) == 1
    db = real_cursor(duckdb)
    try:
        after = db.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
    finally:
        db.close()
    assert calls[0] == after and calls[1] != after  # the retry ran above the bound, then back


def test_a_big_scan_gets_a_database_of_its_own_closed_after(fleet: Path, monkeypatch) -> None:
    """A query over at least OWN_DATABASE_ROWS file rows runs in a database opened for it and
    closed after it (the buffers of a big scan do not stay in the process's database); smaller
    queries share that database."""
    opened: list[object] = []
    real = sqlengine._database
    monkeypatch.setattr(sqlengine, "_database", lambda d: opened.append(real(d)) or opened[-1])
    monkeypatch.setattr(sqlengine, "_SHARED", {})
    with load(fleet) as run:
        rows = sum(
            s.rows for k in run.databases for s in run._side[k].values() if s.table == "kernels"
        )
        monkeypatch.setattr(sqlengine, "OWN_DATABASE_ROWS", rows + 1)
        for _ in range(2):
            run.query("SELECT COUNT(*) AS n FROM kernels")
        assert len(opened) == 1  # the shared one
        monkeypatch.setattr(sqlengine, "OWN_DATABASE_ROWS", rows)
        n = int(run.query("SELECT COUNT(*) AS n FROM kernels")["n"].iloc[0])
    assert n >= rows and len(opened) == 2
    with pytest.raises(sqlengine.duckdb_module().Error):  # closed after its query
        opened[1].execute("SELECT 1")
    assert opened[0].execute("SELECT 1").fetchall() == [(1,)]  # the shared one stays

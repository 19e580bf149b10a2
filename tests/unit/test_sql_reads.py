"""How SQL and table reads take rows out of the rank databases: only the columns a query names
(the result is the same as reading every column), and whole tables through the ADBC driver typed
as pandas reads them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load, sqlengine
from mlaprof.store.schema import TABLES, columns
from tests import shipped_demo
from tests.trace_io_helpers import DATA

QUERIES = [
    "SELECT l.layer, AVG(k.end_ns - k.start_ns) AS t, MAX(l.splits_used) AS s FROM kernels k "
    "JOIN layers l ON l.rank = k.rank AND l.step = k.step AND l.layer = k.layer "
    "WHERE k.splits IS NOT NULL GROUP BY l.layer ORDER BY l.layer",
    "SELECT * FROM layers ORDER BY rank, step, layer",
    "SELECT rank, COUNT(*) AS n FROM steps GROUP BY rank ORDER BY rank",
    "SELECT s.step, s.qlen, l.duration_ns FROM steps s JOIN layers l USING (rank, step) "
    "ORDER BY s.rank, s.step, l.layer LIMIT 50",
]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path_factory.mktemp("f"), "f")
    return run


@pytest.mark.parametrize("sql", QUERIES)
def test_reading_only_named_columns_changes_no_result(
    fleet: Path, sql: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with load(fleet) as run:
        pruned = run.query(sql)
        monkeypatch.setattr(sqlengine, "needed_columns", lambda _sql, t: list(columns(t)))
        full = run.query(sql)
    assert len(full) and pruned.equals(full)


def test_named_columns_are_words_of_the_query() -> None:
    need = sqlengine.needed_columns(QUERIES[0], "layers")
    assert set(need) == {"rank", "step", "layer", "splits_used"}
    assert sqlengine.needed_columns("SELECT COUNT(*) FROM layers", "layers") == list(
        columns("layers")
    )


RUNS = [shipped_demo.run(n) for n in shipped_demo.NAMES]


@pytest.mark.parametrize("run_dir", [*RUNS, None], ids=[p.name for p in RUNS] + ["fleet"])
def test_whole_tables_read_as_pandas_reads_them(
    run_dir: Path | None, fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's bulk read (:meth:`Run.read_tables`) through the ADBC driver, every table
    of every rank (a small one too), is what it reads through pandas without the driver."""
    with load(run_dir or fleet) as run:
        monkeypatch.setattr(sqlengine, "few_rows", lambda _con, _name: False)
        fast = run.read_tables(TABLES)
        monkeypatch.setattr(sqlengine, "adbc_fetch_many",
                            lambda _path, sqls: [sqlengine.UNREAD] * len(sqls))  # fmt: skip
        slow = run.read_tables(TABLES)
    for t in TABLES:
        assert list(fast[t].dtypes.astype(str)) == list(slow[t].dtypes.astype(str)), t
        pd.testing.assert_frame_equal(fast[t], slow[t], obj=t)


@pytest.mark.parametrize("trace", ["fleet_dp2_tp4", "gluon_v0119_bug", "persistent_switch"])
def test_side_files_read_as_pandas_reads_the_same_rows_from_a_database(
    trace: str, tmp_path: Path
) -> None:
    """An import's kernels and layers live in Parquet files: read as tables they are what pandas
    reads from a database holding the same rows (dtypes included: a column of NULLs only, as a
    trace's syncs and deserved S are, holds None, not NaN)."""
    import sqlite3

    from mlaprof.store import columnar

    run_dir, _ = import_rocprof(DATA / "aiter" / trace, tmp_path, "t")
    with load(run_dir) as run:
        sides = [(r, t, s) for r in run.ranks for t, s in run.side_tables(r).items()]
        assert {t for _, t, _ in sides} == {"kernels", "layers"}
        for rank, table, side in sides:
            con = sqlite3.connect(":memory:")
            cols = columns(table)
            con.execute(f"CREATE TABLE {table} ({', '.join(cols)})")
            con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(cols))})",
                            columnar.rows(side))  # fmt: skip
            want = pd.read_sql_query(f"SELECT {', '.join(cols)} FROM {table}", con)
            got = columnar.frame(side)
            where = f"rank {rank} {table}"
            assert list(got.dtypes.astype(str)) == list(want.dtypes.astype(str)), where
            pd.testing.assert_frame_equal(got, want, obj=where)
        layers = run.layers
    assert layers["syncs"].map(lambda v: v is None).all()  # unknown in a trace, as None


def test_a_wal_database_is_never_read_through_the_adbc_driver(tmp_path) -> None:
    """The driver's own SQLite copy would truncate the -shm file this process maps (SIGBUS):
    a database in WAL mode (a live rank) is read by the sqlite3 module; a finished one
    (rollback journal) through the driver."""
    import sqlite3

    from mlaprof.store.sqlengine import UNREAD, adbc_fetch, in_wal_mode

    db = tmp_path / "r.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    con.commit()
    assert in_wal_mode(db) and adbc_fetch(db, "SELECT x FROM t") is UNREAD
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    assert not in_wal_mode(db)
    got = adbc_fetch(db, "SELECT x FROM t")
    assert got is not UNREAD and got.column("x").to_pylist() == [1]

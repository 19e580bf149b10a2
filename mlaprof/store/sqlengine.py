"""SQL over a rank's columnar side tables, run by DuckDB straight on the files.

An import keeps its kernels in Parquet (or, before, Arrow IPC) files (:mod:`.columnar`). Copying
them into SQLite to answer SQL cost 5.5 s per million rows; DuckDB scans the files in place
instead, reading only the columns and row groups a query needs. Within one query every table it
names is visible: a side table as its SQLite rows (usually none) followed by its file's rows, any
other table as its SQLite rows (read through SQLite's ADBC driver into Arrow where installed).
The SQL is DuckDB's dialect, which accepts SQLite's for ordinary queries (SELECT, WHERE, GROUP
BY, JOIN, window functions). This is the engine behind :meth:`mlaprof.store.reader.Run.query`,
the run's one SQL surface; without duckdb installed, SQL naming no columnar table runs in SQLite
over the rank databases attached as one relation (:func:`sqlite_query`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import rank_list
from mlaprof.store import columnar
from mlaprof.store.schema import TABLES, columns

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


def duckdb_module() -> Any:
    try:
        import duckdb
    except ImportError:
        raise MlaprofError(
            "SQL over an import's kernels runs in DuckDB on their Parquet files, and duckdb is "
            "not installed (pip install duckdb; run.read_tables(['kernels']) works without it)"
        ) from None
    return duckdb


def mentioned(sql: str) -> list[str]:
    """The store tables that ``sql`` names (as whole words)."""
    return [t for t in TABLES if re.search(rf"\b{re.escape(t)}\b", sql, re.I)]


_DUCK_TYPES = {"int64": "BIGINT", "double": "DOUBLE", "string": "VARCHAR"}


def needed_columns(sql: str, table: str) -> list[str]:
    """The columns of ``table`` that ``sql`` may read: every one it names as a word (all of them
    when it says ``*``). The others are not read from SQLite; the view shows them as NULLs no
    query looks at."""
    cols = list(columns(table))
    if "*" in sql:
        return cols
    return [c for c in cols if re.search(rf"\b{re.escape(c)}\b", sql, re.I)]


def _plain_schema(table: str, cols: Sequence[str]) -> pa.Schema:
    import pyarrow as pa

    fields = {f.name: f for f in columnar.arrow_schema(table)}
    return pa.schema(
        [
            pa.field(c, pa.string() if pa.types.is_dictionary(fields[c].type) else fields[c].type)
            for c in cols
        ]
    )


class Unread:
    """The ADBC driver could not read the table (not installed, or a column it typed otherwise)."""


UNREAD = Unread()


def in_wal_mode(db_path: Path) -> bool:
    """The database file's header says WAL (bytes 18-19 = 2): a live rank (writers switch to
    rollback journaling when they finish), or one whose writer died."""
    try:
        with open(db_path, "rb") as f:
            head = f.read(20)
    except OSError:
        return True  # unreadable here: leave it to the sqlite3 reader and its message
    return len(head) < 20 or 2 in (head[18], head[19])


def adbc_fetch(db_path: Path, sql: str) -> pa.Table | Unread:
    """``sql`` on a rank database through SQLite's ADBC driver (its own read-only connection; C,
    straight into Arrow), or :data:`UNREAD` (no driver, a column it cannot type, or a database in
    WAL mode).

    The driver links its own copy of SQLite. Two copies in one process do not see each other's
    POSIX locks, so the driver's copy, opening a WAL database's ``-shm`` file, takes itself for
    the first connection and truncates that file under the mapping of this process's
    ``sqlite3`` connections (the live follower, the writer of ``mlaprof run --live``): SIGBUS.
    A WAL-mode database is therefore read by the ``sqlite3`` module only."""
    if in_wal_mode(db_path):
        return UNREAD
    try:
        import adbc_driver_sqlite.dbapi as adbc

        with adbc.connect(f"file:{db_path}?mode=ro") as ac, ac.cursor() as cur:
            cur.execute(sql)
            return cur.fetch_arrow_table()
    except Exception:  # noqa: BLE001 - the caller reads row by row instead
        return UNREAD


def adbc_fetch_many(db_path: Path, sqls: Sequence[str]) -> list[pa.Table | Unread]:
    """:func:`adbc_fetch` of each of ``sqls`` on one connection (opening one costs about as
    much as reading a small table); a statement it cannot read is :data:`UNREAD` alone."""
    if not sqls:
        return []
    if in_wal_mode(db_path):
        return [UNREAD] * len(sqls)
    try:
        import adbc_driver_sqlite.dbapi as adbc

        ac = adbc.connect(f"file:{db_path}?mode=ro")
    except Exception:  # noqa: BLE001 - the caller reads row by row instead
        return [UNREAD] * len(sqls)
    out: list[pa.Table | Unread] = []
    with ac:
        for sql in sqls:
            try:
                with ac.cursor() as cur:
                    cur.execute(sql)
                    out.append(cur.fetch_arrow_table())
            except Exception:  # noqa: BLE001 - the caller reads this one row by row
                out.append(UNREAD)
    return out


def has_rows(con: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` of the database holds a row (one probe, ~10 us; True where the probe
    fails, so that the read after it says what is wrong)."""
    try:
        return con.execute(f"SELECT 1 FROM main.{table} LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return True


def _adbc_rows(src: RankSource, table: str, cols: Sequence[str]) -> pa.Table | None | Unread:
    tab = adbc_fetch(src.db_path, f"SELECT {', '.join(cols)} FROM main.{table}")
    if isinstance(tab, Unread):
        return tab
    try:
        return tab.cast(_plain_schema(table, cols)) if tab.num_rows else None
    except Exception:  # noqa: BLE001 - a column typed otherwise: row by row
        return UNREAD


def _python_rows(src: RankSource, table: str, cols: Sequence[str]) -> pa.Table | None:
    """Row by row through the source's own connection (in its thread)."""
    import pyarrow as pa

    schema = _plain_schema(table, cols)
    rows = src.con.execute(f"SELECT {', '.join(cols)} FROM main.{table}").fetchall()
    if not rows:
        return None
    arrays = []
    for field, values in zip(schema, zip(*rows, strict=True), strict=True):
        try:
            arrays.append(pa.array(values, field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            raise MlaprofError(
                f"rank{src.rank}.db: column {table}.{field.name} holds values of another type"
            ) from None
    return pa.Table.from_arrays(arrays, schema=schema)


def _read_all(
    sources: Sequence[RankSource], table: str, cols: Sequence[str]
) -> list[pa.Table | None]:
    """Every source's rows of ``table`` (``cols`` only): the ADBC reads in threads (their own
    connections, in C), any it could not do row by row here (the sources' connections stay in
    their thread). A source whose table is empty is not read (None, as a read of no rows): an
    import's kernels, layers and API calls lie in its files, and the ADBC read of an empty table
    costs a connection (~0.3 ms) per source and query. A table of at most :data:`FEW_ROWS`
    rows (a trace's API calls, a recorded run's steps) is read through the source's own
    connection: a connection of its own would cost more than the rows."""
    cols = list(cols) or ["rank"]
    todo = [src for src in sources if table not in src.lacks and has_rows(src.con, table)]
    few = {id(src) for src in todo if few_rows(src.con, table)}
    todo = [src for src in todo if id(src) not in few]
    if len(todo) <= 1:  # no thread to start for one
        got = [_adbc_rows(src, table, cols) for src in todo]
    else:
        with ThreadPoolExecutor(min(4, len(todo))) as pool:
            got = list(pool.map(_adbc_rows, todo, repeat(table), repeat(cols)))
    read: dict[int, pa.Table | Unread | None] = dict.fromkeys(few, UNREAD)
    read.update({id(src): g for src, g in zip(todo, got, strict=True)})
    return [
        _stand_in(src, table, cols)
        if table in src.lacks
        else _python_rows(src, table, cols)
        if isinstance(g := read.get(id(src)), Unread)
        else g
        for src in sources
    ]


FEW_ROWS = 4096


def few_rows(con: sqlite3.Connection, table: str) -> bool:
    """Whether ``table`` holds at most :data:`FEW_ROWS` rows (its largest rowid bounds them: one
    probe down the b-tree, not a count)."""
    try:
        top = con.execute(f"SELECT MAX(rowid) FROM main.{table}").fetchone()[0]
    except sqlite3.Error:
        return False
    return top is not None and top <= FEW_ROWS


def _stand_in(src: RankSource, table: str, cols: Sequence[str]) -> pa.Table | None:
    """The rows standing in for a table the database lacks (None: none)."""
    import pyarrow as pa

    frame = src.stand_ins.get(table)
    if frame is None or not len(frame):
        return None
    return pa.Table.from_pandas(frame[list(cols)], schema=_plain_schema(table, cols),
                                preserve_index=False)  # fmt: skip


def _plain_ints(tab: pa.Table) -> pa.Table:
    """DuckDB sums integers as 128-bit (Arrow decimal(38, 0)): back to int64 where they fit, as
    SQLite returns them; other decimals as float64."""
    import pyarrow as pa

    for i, field in enumerate(tab.schema):
        if pa.types.is_decimal(field.type):
            col = tab.column(i)
            try:
                col = col.cast(pa.int64()) if field.type.scale == 0 else col.cast(pa.float64())
            except pa.ArrowInvalid:
                col = col.cast(pa.float64())
            tab = tab.set_column(i, field.name, col)
    return tab


def arrow_frame(tab: pa.Table) -> pd.DataFrame:
    """An Arrow result as a frame, as Arrow converts it but for an integer column holding NULLs:
    pandas' nullable integers (``Int64``), not float64, so a step or a count reads 3, not 3.0,
    and an int64 past 2**53 stays exact. A column without NULLs stays numpy int64."""
    import pandas as pd
    import pyarrow as pa

    df = tab.to_pandas()
    for i, (field, col) in enumerate(zip(tab.schema, tab.columns, strict=True)):
        if pa.types.is_integer(field.type) and col.null_count:
            t = str(field.type)  # int8 .. uint64: pandas' Int8 .. UInt64
            dtype = pd.api.types.pandas_dtype("UInt" + t[4:] if t[0] == "u" else "Int" + t[3:])
            df.isetitem(i, col.to_pandas(types_mapper={field.type: dtype}.get))
    return df


def frame_of_rows(names: list[str], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """SQLite's rows as a frame, as ``pandas.read_sql_query`` makes it but for a column of
    integers and NULLs: pandas' nullable ``Int64`` (exact), not float64."""
    import pandas as pd

    df = pd.DataFrame.from_records(rows, columns=names, coerce_float=True)
    for i in range(len(names) if rows else 0):
        if df.dtypes.iloc[i].kind not in "fO":  # ints without NULLs, strings: as they are
            continue
        vals = [r[i] for r in rows]
        ints = [v for v in vals if v is not None]
        if ints and len(ints) < len(vals) and all(type(v) is int for v in ints):
            df.isetitem(i, pd.array(vals, dtype="Int64"))
    return df


@dataclass(frozen=True)
class RankSource:
    """One rank as the engine sees it: its read-only connection, database file, side tables."""

    rank: int
    con: sqlite3.Connection
    db_path: Path
    sides: Mapping[str, columnar.SideTable]
    # store tables the database lacks (an older schema), and the rows standing in for them
    lacks: frozenset[str] = frozenset()
    stand_ins: Mapping[str, pd.DataFrame] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Statements:
    """Several queries over the same tables, run on one cursor: the views over the ranks' rows
    and files are built once for all of them (building them is most of a small query's cost:
    a view over a Parquet file binds and reads its footer, ~1 ms). ``items``: (sql, params)."""

    items: tuple[tuple[str, tuple[Any, ...]], ...]

    @property
    def text(self) -> str:
        return "\n".join(sql for sql, _ in self.items)


def query(
    sources: Sequence[RankSource],
    sql: str | Statements,
    params: Sequence[Any] = (),
    frames: Mapping[str, pd.DataFrame] | None = None,
    portable: bool = False,
) -> Any:
    """``sql`` over the given ranks as one: each table it names is the union of those ranks' rows
    (a side table read from its file after its SQLite rows, any other table from SQLite).
    ``frames``: small tables the caller already holds, visible to the SQL under their names
    (which must not be a store table's). ``sql`` may be :class:`Statements`: each of them is
    run over the same views, and the result is a list of frames, one per statement.
    ``portable``: the caller's SQL gives the same frame in SQLite as in DuckDB (tested against
    both); where it names no columnar table and at most :data:`SQLITE_ROWS` rows, SQLite runs
    it (see :func:`in_sqlite`)."""
    batch = sql if isinstance(sql, Statements) else Statements(((sql, tuple(params)),))
    named = mentioned(batch.text)
    if portable and in_sqlite(sources, named):
        out = [sqlite_query(sources, q, p, frames) for q, p in batch.items]
        return out if isinstance(sql, Statements) else out[0]
    try:
        duckdb = duckdb_module()
    except MlaprofError:
        if any(t in s.sides for s in sources for t in named):
            raise  # an import's kernels sit in files only DuckDB reads in place
        out = [sqlite_query(sources, q, p, frames) for q, p in batch.items]
        return out if isinstance(sql, Statements) else out[0]
    file_rows = sum(s.sides[t].rows for s in sources for t in named if t in s.sides)
    own = _database(duckdb) if file_rows >= OWN_DATABASE_ROWS else None
    db = own.cursor() if own is not None else _cursor(duckdb)
    try:
        for name, frame in (frames or {}).items():
            if name in TABLES:
                raise MlaprofError(f"a frame may not take the store table's name {name!r}")
            db.register(name, frame)
        every = batch.text
        for table in mentioned(every):
            parts = []
            need = needed_columns(every, table)
            read = _read_all(sources, table, need)
            for i, (src, rows) in enumerate(zip(sources, read, strict=True)):
                # i: a rank may have several databases (roles)
                if rows is not None:
                    db.register(f"_db_{table}_{i}", rows)
                    parts.append(_padded(table, rows.schema.names, f"_db_{table}_{i}"))
                side = src.sides.get(table)
                if side is not None:
                    parts.append(_scan(db, side, i))
            if not parts:  # an empty table, typed
                db.register(f"_db_{table}", columnar.arrow_schema(table).empty_table())
                parts.append(f"SELECT {', '.join(columns(table))} FROM _db_{table}")
            try:  # DuckDB reads each file's footer here: a damaged one fails now
                db.execute(f"CREATE TEMP VIEW {table} AS " + " UNION ALL ".join(parts))
            except duckdb.Error as e:
                msg = str(e).splitlines()[0][:300]
                raise MlaprofError(
                    f"the {table} rows of {rank_list(s.rank for s in sources)} cannot be read "
                    f"(DuckDB: {msg})"
                ) from None
        out = [_run(duckdb, db, q, p, sources) for q, p in batch.items]
    finally:
        db.close()
        if own is not None:
            own.close()
    return out if isinstance(sql, Statements) else out[0]


# rows, over the tables a portable query names, up to which SQLite answers it: starting DuckDB
# (its import and a database, 60-90 ms) costs more than SQLite's pass over a recorded run's
# thousands of rows, and a report of such a run then needs no DuckDB at all
SQLITE_ROWS = 200_000


def in_sqlite(sources: Sequence[RankSource], named: Sequence[str] | set[str]) -> bool:
    """Whether SQLite answers a portable query over ``named``: no columnar table among them,
    and at most :data:`SQLITE_ROWS` rows in their databases (each count stops past it), over
    no more rank databases than SQLite attaches to one connection."""
    if any(t in s.sides for s in sources for t in named) or len(sources) > attach_limit():
        return False
    left = SQLITE_ROWS
    for src in sources:
        for t in named:
            if t in src.lacks:
                stand_in = src.stand_ins.get(t)
                left -= 0 if stand_in is None else len(stand_in)
            else:
                left -= src.con.execute(
                    f"SELECT COUNT(*) FROM (SELECT 1 FROM main.{t} LIMIT ?)", (left + 1,)
                ).fetchone()[0]
            if left < 0:
                return False
    return True


@functools.cache
def attach_limit() -> int:
    """The databases SQLite attaches to one connection (10 unless built otherwise; the
    library's, so asked once)."""
    db = sqlite3.connect(":memory:")
    try:
        return db.getlimit(sqlite3.SQLITE_LIMIT_ATTACHED)
    finally:
        db.close()


def sqlite_query(
    sources: Sequence[RankSource],
    sql: str,
    params: Sequence[Any] = (),
    frames: Mapping[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """``sql`` as :func:`query` runs it, in SQLite (no duckdb installed, no columnar table
    named): every rank database attached read-only to one in-memory database, each table the
    SQL names a TEMP view of their rows ``UNION ALL``. SQLite pushes a ``WHERE`` on the view
    into each rank's table (its indexes serve it)."""
    import pandas as pd

    db = sqlite3.connect(":memory:", uri=True, check_same_thread=False)
    try:
        if len(sources) > (limit := attach_limit()):
            raise MlaprofError(
                f"SQL over {len(sources)} rank databases without duckdb exceeds SQLite's "
                f"{limit} attached databases (pip install duckdb)"
            )
        for i, src in enumerate(sources):
            uri = "file:" + str(src.db_path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
            db.execute(f"ATTACH DATABASE ? AS r{i}", (uri,))
        for name, frame in (frames or {}).items():
            if name in TABLES:
                raise MlaprofError(f"a frame may not take the store table's name {name!r}")
            frame.to_sql(name, db, index=False)
        for table in mentioned(sql):
            cols = ", ".join(columns(table))
            parts = []
            for i, src in enumerate(sources):
                if table not in src.lacks:
                    parts.append(f"SELECT {cols} FROM r{i}.{table}")
                elif src.stand_ins.get(table) is not None:  # an older run's, from run.json
                    src.stand_ins[table].to_sql(f"_stand_in_{table}_{i}", db, index=False)
                    parts.append(f"SELECT {cols} FROM _stand_in_{table}_{i}")
            db.execute(
                f"CREATE TEMP VIEW {table} AS " + (" UNION ALL ".join(parts) or _no_rows(table))
            )
        try:
            cur = db.execute(sql, tuple(params))
            return frame_of_rows([d[0] for d in cur.description or ()], cur.fetchall())
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
            msg = str(e).splitlines()[0][:300]
            ranks = rank_list(s.rank for s in sources)
            raise MlaprofError(f"SQL over {ranks} failed (SQLite): {msg}") from None
    finally:
        db.close()


def _no_rows(table: str) -> str:
    return "SELECT " + ", ".join(f"NULL AS {c}" for c in columns(table)) + " WHERE 0"


def _run(
    duckdb: Any, db: Any, sql: str, params: Sequence[Any], sources: Sequence[RankSource]
) -> pd.DataFrame:
    """One statement on the cursor whose views are built."""
    try:
        try:
            tab = db.sql(sql, params=list(params) or None).to_arrow_table()
        except duckdb.OutOfMemoryException:
            # an operator that cannot spill (the replay query's ASOF join) may meet the
            # cap (DuckDB's use varies run to run): once more with RETRY_MEMORY (a setting
            # of the whole database, so put back after)
            db.execute(f"SET memory_limit = '{RETRY_MEMORY}'")
            try:
                tab = db.sql(sql, params=list(params) or None).to_arrow_table()
            finally:
                db.execute(f"SET memory_limit = '{bounded()['memory_limit']}'")
    except duckdb.Error as e:
        msg = str(e).splitlines()[0][:300]
        ranks = rank_list(s.rank for s in sources)
        raise MlaprofError(f"SQL over {ranks} failed (DuckDB): {msg}") from None
    return arrow_frame(_plain_ints(tab))


# DuckDB's defaults take 80% of the machine's memory and a thread per core (each with its own
# buffers): a report over an 11M-kernel import peaked near 3 GB. Queries here are bounded and
# spill to a temporary folder past the limit (DuckDB's own ``memory_limit``/``temp_directory``).
MEMORY_ENV = "MLAPROF_SQL_MEMORY"
DEFAULT_MEMORY = "256MB"
RETRY_MEMORY = "512MB"  # the second try of a query that met DEFAULT_MEMORY
THREADS = 2


# One in-memory DuckDB database per process, each query on a cursor of its own: opening a
# database costs about 23 ms, a cursor 0.2 ms, and a report over 16 ranks runs ~500 queries. A
# cursor's registered tables and TEMP views are its own and go with it; nothing else is
# created, so no query sees another's tables. A forked child opens its own. A query over at
# least OWN_DATABASE_ROWS file rows gets a database of its own, closed after it: the buffers
# a big scan leaves in a database that stays open raised an 11M-kernel report's peak from
# ~0.9 to ~1.1 GB, and the 23 ms are nothing beside such a query.
_SHARED: dict[int, Any] = {}
_SHARED_LOCK = threading.Lock()
OWN_DATABASE_ROWS = 1_000_000


def _database(duckdb: Any) -> Any:
    """A new in-memory database with mlaprof's settings."""
    db = duckdb.connect(config=bounded())
    db.execute("SET default_null_order = 'nulls_first_on_asc_last_on_desc'")  # as SQLite
    # a report's stdout is the report (in Jupyter, DuckDB refuses the setting)
    with contextlib.suppress(duckdb.Error):
        db.execute("SET enable_progress_bar = false")
    return db


def _cursor(duckdb: Any) -> Any:
    """A fresh connection (cursor) to this process's database, made on first use."""
    with _SHARED_LOCK:
        db = _SHARED.get(os.getpid())
        if db is None:
            _SHARED.clear()  # a parent's database, inherited by fork: not used here
            db = _SHARED[os.getpid()] = _database(duckdb)
        return db.cursor()


def bounded() -> dict[str, Any]:
    """The DuckDB settings of every connection mlaprof opens (here and the live follower)."""
    import tempfile

    return {
        "memory_limit": os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY,
        "threads": min(THREADS, os.cpu_count() or 1),
        "preserve_insertion_order": False,
        "temp_directory": os.path.join(tempfile.gettempdir(), f"mlaprof-sql-{os.getpid()}"),
    }


def _padded(table: str, have: Sequence[str], name: str) -> str:
    """A SELECT of every column of ``table`` from ``name``: the columns it lacks as typed
    NULLs (they were not read, as the query does not name them)."""
    types = {f.name: f.type for f in _plain_schema(table, columns(table))}
    cols = [
        c if c in have else f"CAST(NULL AS {_DUCK_TYPES[str(types[c])]}) AS {c}"
        for c in columns(table)
    ]
    return f"SELECT {', '.join(cols)} FROM {name}"


def _scan(db: Any, side: columnar.SideTable, i: int) -> str:
    """A SELECT over the file, columns in the table's order (the ``rank`` column included)."""
    cols = ", ".join(columns(side.table))
    if side.path.suffix == ".arrow":  # runs imported before Parquet: through pyarrow
        import pyarrow.dataset as ds

        name = f"_file_{side.table}_{i}"
        db.register(name, ds.dataset(str(side.path), format="ipc"))
        return f"SELECT {cols} FROM {name}"
    path = str(side.path).replace("'", "''")
    return f"SELECT {cols} FROM read_parquet('{path}')"

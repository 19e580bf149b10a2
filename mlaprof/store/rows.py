"""Exact rows of a stored run, read straight from its rank databases.

The DataFrame API turns NULL integers into NaN floats; exporters need the stored integers
(nanosecond timestamps) bit for bit, so they read rows through their own read-only connections.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.store import columnar
from mlaprof.store.schema import TABLES

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


def iter_rows(run: Run, table: str, rank: int | None = None) -> Iterator[dict[str, Any]]:
    """``table``'s rows of every rank (or of ``rank`` only), in storage order, as dicts (``rank``
    first); an import's Arrow-stored rows follow the database's. Streams: one row (or Arrow
    batch) at a time."""
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    cols = ["rank"] + [c for c, _ in TABLES[table]]
    for rk in run.ranks if rank is None else [rank]:
        path = Path(run.path) / f"rank{rk}.db"
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                for r in con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid"):
                    yield dict(zip(cols, r, strict=True))
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            raise MlaprofError(f"{path} cannot be read: {e}") from None
        side = run.side_tables(rk).get(table)
        if side is not None:  # an import's rows, after the database's
            for r in columnar.rows(side):
                yield dict(zip(cols, r, strict=True))


def rows(run: Run, table: str, rank: int | None = None) -> list[dict[str, Any]]:
    """:func:`iter_rows` as a list (exporters that sort or pass over the rows twice)."""
    return list(iter_rows(run, table, rank))


def count_rows(run: Run, table: str, rank: int) -> int:
    """How many rows ``table`` holds for ``rank`` (database and columnar file), without reading
    them."""
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    path = Path(run.path) / f"rank{rank}.db"
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            n = int(con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise MlaprofError(f"{path} cannot be read: {e}") from None
    side = run.side_tables(rank).get(table)
    return n + (side.rows if side is not None else 0)


_ARROW_TYPES = {"INTEGER": "int64", "TEXT": "string", "REAL": "float64"}


def iter_batches(run: Run, table: str, rank: int, columns: list[str]) -> Iterator[Any]:
    """``columns`` of ``table``'s rows of ``rank`` as Arrow record batches of at most
    ``columnar.ROW_BATCH`` rows, in :func:`iter_rows`'s order (the database's rows, then the
    import's columnar ones), text plain (never dictionary-encoded): for exporters that write a
    batch at a time instead of a Python object per value."""
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    pa = columnar._pa()
    types = dict(TABLES[table])
    schema = pa.schema([(c, _ARROW_TYPES.get(types[c], "string")) for c in columns])
    path = Path(run.path) / f"rank{rank}.db"
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = con.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid")
            while chunk := cur.fetchmany(columnar.ROW_BATCH):
                cols = [list(c) for c in zip(*chunk, strict=True)]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(v, type=f.type) for v, f in zip(cols, schema, strict=True)],
                    schema=schema,
                )
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise MlaprofError(f"{path} cannot be read: {e}") from None
    side = run.side_tables(rank).get(table)
    if side is not None:
        for batch in columnar.batches(side, columns):
            yield pa.RecordBatch.from_arrays(
                [batch.column(c).cast(f.type) for c, f in zip(columns, schema, strict=True)],
                schema=schema,
            )


def typed(run: Run, table: str, rank: int, columns: list[str]) -> bool:
    """Whether ``rank``'s database rows of ``table`` hold in ``columns`` only what the columns
    declare (SQLite keeps any value in any column): what :func:`iter_batches` needs to build
    typed Arrow columns. The import's columnar rows are typed by their file's schema."""
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    types = dict(TABLES[table])
    want = {"INTEGER": "'integer'", "TEXT": "'text'", "REAL": "'real', 'integer'"}
    cond = " OR ".join(f"typeof({c}) NOT IN ({want[types[c]]}, 'null')" for c in columns)
    path = Path(run.path) / f"rank{rank}.db"
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = con.execute(f"SELECT EXISTS(SELECT 1 FROM {table} WHERE {cond})").fetchone()
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise MlaprofError(f"{path} cannot be read: {e}") from None
    return not row[0]

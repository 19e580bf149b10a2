"""Columnar side tables: bulk-imported rows kept as Arrow IPC files next to a rank's database.

SQLite binds a row at a time (about 2 us per kernel row of 19 values on the 2-core machine), so
a million-dispatch trace spent most of its import inserting. Imported rows are written once and
never appended to, so an import stores its kernels as ``rank<N>.<table>.arrow`` instead (Arrow
IPC, zstd, names dictionary-encoded: ~0.2 s and ~9 MB per million rows, readable as is by
pandas.read_feather, pyarrow and polars). The rank database's ``meta`` table names the file and
its row count (key ``columnar:<table>``); readers return the table's SQLite rows followed by the
file's rows, so a table reads the same whichever way its rows were stored.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.store.schema import TABLES, columns

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

META_PREFIX = "columnar:"
BATCH_ROWS = 65_536  # rows per record batch: readers stream one batch at a time


@dataclass(frozen=True)
class SideTable:
    """One rank's columnar rows of one table."""

    table: str
    path: Path
    rows: int


def file_name(rank: int, table: str) -> str:
    return f"rank{int(rank)}.{table}.arrow"


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        raise MlaprofError(
            "this run keeps imported rows in Arrow files and pyarrow is not installed "
            "(pip install pyarrow)"
        ) from None
    return pa


def arrow_schema(table: str) -> pa.Schema:
    """``columns(table)`` as Arrow types: INTEGER int64, REAL float64, TEXT dictionary strings."""
    pa = _pa()
    types = {
        "INTEGER": pa.int64(),
        "REAL": pa.float64(),
        "TEXT": pa.dictionary(pa.int32(), pa.string()),
    }
    return pa.schema(
        [pa.field("rank", pa.int64(), nullable=False)]
        + [pa.field(c, types[t]) for c, t in TABLES[table]]
    )


def build(
    table: str,
    rank: int,
    n: int,
    numbers: Mapping[str, tuple[np.ndarray, np.ndarray | None]],
    text: Mapping[str, tuple[Sequence[Any], np.ndarray]] | None = None,
) -> pa.Table:
    """``n`` rows of ``table`` as an Arrow table in the side-file schema.

    ``numbers``: column -> (values, NULL mask or None). ``text``: column -> (distinct values,
    per-row index into them). Columns given in neither are NULL.
    """
    pa = _pa()
    schema = arrow_schema(table)
    text = text or {}
    unknown = (set(numbers) | set(text)) - set(columns(table))
    if unknown:
        raise MlaprofError(f"table {table!r} has no column(s) {', '.join(sorted(unknown))}")
    arrays = []
    for field in schema:
        c = field.name
        if c == "rank":
            arrays.append(pa.array(np.full(n, int(rank), np.int64)))
        elif c in text:
            values, idx = text[c]
            if len(idx) != n:
                raise MlaprofError(f"internal: column {c} has {len(idx)} values, not {n}")
            # as SQLite's TEXT affinity would: a non-string name is stored as its text
            dictionary = pa.array(
                [v if v is None or isinstance(v, str) else str(v) for v in values], pa.string()
            )
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), dictionary))
        elif c in numbers:
            arr, mask = numbers[c]
            if len(arr) != n:
                raise MlaprofError(f"internal: column {c} has {len(arr)} values, not {n}")
            has_null = mask is not None and bool(mask.any())
            arrays.append(pa.array(arr, field.type, mask=mask if has_null else None))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def write(run_dir: Path, rank: int, table: str, parts: Sequence[pa.Table]) -> SideTable:
    """Write the parts, in order, as the rank's side file of ``table``."""
    pa = _pa()
    tab = pa.concat_tables(parts).unify_dictionaries()  # the IPC file allows one dictionary
    path = Path(run_dir) / file_name(rank, table)
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, tab.schema, options=opts) as w:
        w.write_table(tab, max_chunksize=BATCH_ROWS)
    return SideTable(table, path, tab.num_rows)


def record(con: sqlite3.Connection, side: SideTable) -> None:
    """Name the file in the rank database (inside the caller's transaction)."""
    con.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (META_PREFIX + side.table, json.dumps({"file": side.path.name, "rows": side.rows})),
    )


def side_tables(con: sqlite3.Connection, run_dir: Path) -> dict[str, SideTable]:
    """The columnar tables a rank database names; a named file that is missing is an error."""
    out: dict[str, SideTable] = {}
    rows = con.execute(
        "SELECT key, value FROM meta WHERE key LIKE ?", (META_PREFIX + "%",)
    ).fetchall()
    for key, value in rows:
        table = key[len(META_PREFIX) :]
        try:
            doc = json.loads(value)
            name, n = str(doc["file"]), int(doc["rows"])
        except (TypeError, ValueError, KeyError):
            raise MlaprofError(
                f"{run_dir}: corrupt columnar entry {key!r} in the database"
            ) from None
        path = Path(run_dir) / name
        if table not in TABLES or "/" in name or not path.is_file():
            raise MlaprofError(f"{run_dir} is incomplete: {name} ({table} rows) is missing")
        out[table] = SideTable(table, path, n)
    return out


def read(side: SideTable) -> pa.Table:
    """The file as an Arrow table, checked against the schema and the recorded row count."""
    pa = _pa()
    try:
        with pa.memory_map(str(side.path)) as src:
            tab = pa.ipc.open_file(src).read_all()
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable Arrow file ({e})") from None
    if tab.schema.names != list(columns(side.table)) or tab.num_rows != side.rows:
        raise MlaprofError(
            f"{side.path} does not hold the recorded {side.rows} {side.table} rows "
            f"({tab.num_rows} rows, columns {', '.join(tab.schema.names)})"
        )
    return tab


def _plain(tab: pa.Table) -> pa.Table:
    """Dictionary columns decoded to plain strings (what SQLite returns)."""
    pa = _pa()
    for i, field in enumerate(tab.schema):
        if pa.types.is_dictionary(field.type):
            tab = tab.set_column(i, field.name, tab.column(i).cast(pa.string()))
    return tab


def frame(side: SideTable) -> pd.DataFrame:
    """The rows as a DataFrame typed like a SQLite query's (integers with NULLs become float)."""
    return _plain(read(side)).to_pandas()


def rows(side: SideTable) -> Iterator[tuple[Any, ...]]:
    """Exact rows (Python ints and None), in file order, turned into Python one batch at a time."""
    for batch in _plain(read(side)).to_batches():
        yield from zip(*(col.to_pylist() for col in batch.columns), strict=True)


def mentions(sql: str, table: str) -> bool:
    return re.search(rf"\b{re.escape(table)}\b", sql, re.I) is not None


def materialize(con: sqlite3.Connection, side: SideTable, rank: int) -> None:
    """Shadow ``side.table`` on this (read-only) connection with a TEMP table holding its SQLite
    rows followed by the file's, so that any SQL sees every row (temp names resolve first)."""
    from mlaprof.store.bulk import insert_columns

    pa = _pa()
    cols = columns(side.table)
    con.execute(
        f"CREATE TEMP TABLE {side.table} AS SELECT {', '.join(cols)} FROM main.{side.table}"
    )
    for batch in read(side).to_batches():
        arrays: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
        for name, col in zip(batch.schema.names, batch.columns, strict=True):
            if name == "rank":
                continue
            mask = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else None
            if pa.types.is_dictionary(col.type):
                lut = np.array(col.dictionary.to_pylist() + [None], dtype=object)
                idx = col.indices.fill_null(len(lut) - 1).to_numpy(zero_copy_only=False)
                arrays[name] = (lut[idx], mask)
            else:
                arrays[name] = (col.fill_null(0).to_numpy(zero_copy_only=False), mask)
        insert_columns(con, side.table, rank, arrays, batch.num_rows, schema="temp")
    con.commit()

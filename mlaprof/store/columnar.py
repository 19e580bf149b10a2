"""Columnar side tables: bulk-imported rows kept as Parquet files next to a rank's database.

SQLite binds a row at a time (about 2 us per kernel row of 19 values on the 2-core machine), so
a million-dispatch trace spent most of its import inserting. Imported rows are written once and
never appended to, so an import stores its kernels and its layers as one Parquet file per rank
and table instead, ``<table>/host=<host>/rank=<N>/part-0.parquet`` in the run folder
(docs/store.md; LZ4, names dictionary-encoded, integers delta-encoded, row groups of 65,536 rows
with min/max statistics: ~0.1 s of CPU and a few MB per million rows; readable as is by pyarrow,
pandas, polars and DuckDB, which skips row groups a filter excludes). Runs imported before kept
``rank<N>.<table>.parquet`` or Arrow IPC files (``.arrow``) beside the database; all are read.
The rank database's ``meta`` table names the file and its row count (key ``columnar:<table>``);
readers return the table's SQLite rows followed by the file's rows, so a table reads the same
whichever way its rows were stored. SQL over these rows runs in DuckDB
(:mod:`mlaprof.store.sqlengine`), straight on the files.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import plural
from mlaprof.store.schema import TABLES, columns

# NumPy (and arrow_numpy, built on it) is imported where rows are built or converted: opening a
# run (`runs`, a report whose JSON the run keeps) reads no array
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from mlaprof.store.spill import Spill, SpillChain

META_PREFIX = "columnar:"
BATCH_ROWS = 65_536  # rows per record batch: readers stream one batch at a time
# the files' layout, recorded in each file's key-value metadata with the table and the store's
# schema version (docs/store.md): 1 = <table>/host=<host>/rank=<rank>/part-0.parquet
LAYOUT_VERSION = 1
UNKNOWN_HOST = "unknown"


@dataclass(frozen=True)
class SideTable:
    """One rank's columnar rows of one table."""

    table: str
    path: Path
    rows: int


def host_label(host: str | None) -> str:
    """A host name as a Hive partition value: characters a path or a partition cannot hold
    become ``_`` (``unknown`` where the trace names no host)."""
    if not host:
        return UNKNOWN_HOST
    label = re.sub(r"[^A-Za-z0-9._-]", "_", str(host)).strip(".") or UNKNOWN_HOST
    return label[:128]


def file_name(rank: int, table: str, host: str | None = None) -> str:
    """The file of one rank's rows of ``table``, relative to the run folder: Hive-partitioned by
    host and rank, so DuckDB, Polars, Spark or Trino read a fleet (or many runs) in place."""
    return f"{table}/host={host_label(host)}/rank={int(rank)}/part-0.parquet"


def _pa() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401
        import pyarrow.parquet  # noqa: F401
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

    ``numbers``: column -> (values, NULL mask or None); values are a NumPy array or an Arrow
    (chunked) array of the column's type, taken as it is. ``text``: column -> (distinct values,
    per-row index into them). Columns given in neither are NULL.
    """
    import numpy as np

    from mlaprof.formats import arrow_numpy

    pa = _pa()
    schema = arrow_schema(table)
    text = text or {}
    unknown = (set(numbers) | set(text)) - set(columns(table))
    if unknown:
        raise MlaprofError(
            f"table {table!r} has no {plural('column(s)', len(unknown))} "
            f"{', '.join(sorted(unknown))}"
        )
    arrays = []
    for field in schema:
        c = field.name
        if c == "rank":
            arrays.append(arrow_numpy.array(np.full(n, int(rank), np.int64), pa.int64()))
        elif c in text:
            values, idx = text[c]
            if len(idx) != n:
                raise MlaprofError(f"internal: column {c} has {len(idx)} values, not {n}")
            # as SQLite's TEXT affinity would: a non-string name is stored as its text
            # a NULL name is a NULL index (Parquet stores no NULL inside a dictionary)
            missing = np.array([v is None for v in values] or [False])
            mask = missing[np.asarray(idx)] if missing.any() else None
            dictionary = arrow_numpy.strings(
                ["" if v is None else v if isinstance(v, str) else str(v) for v in values]
            )
            indices = arrow_numpy.array(np.asarray(idx), pa.int32(), mask)
            arrays.append(pa.DictionaryArray.from_arrays(indices, dictionary))
        elif c in numbers:
            arr, mask = numbers[c]
            if len(arr) != n:
                raise MlaprofError(f"internal: column {c} has {len(arr)} values, not {n}")
            has_null = mask is not None and bool(mask.any())
            if isinstance(arr, np.ndarray):
                arrays.append(arrow_numpy.array(arr, field.type, mask if has_null else None))
            elif arr.type == field.type and not has_null:
                arrays.append(arr)  # the parser's own column: no copy
            else:
                raise MlaprofError(f"internal: column {c} is Arrow {arr.type}, not {field.type}")
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


class Pending:
    """Rows of ``table`` whose Arrow table is built a batch at a time as the file is written
    (:func:`build` over ``BATCH_ROWS`` rows of the columns, with those of ``spill`` read back
    from disk alongside): memory holds one batch of the file, never all of it."""

    def __init__(
        self,
        table: str,
        rank: int,
        n: int,
        numbers: Mapping[str, tuple[Any, np.ndarray | None]],
        text: Mapping[str, tuple[Sequence[Any], np.ndarray]] | None,
        spill: Spill | SpillChain,
        spilled: Sequence[str],
    ) -> None:
        if spill.n != n:
            raise MlaprofError(f"internal: {spill.n} spilled rows for {n} {table} rows")
        self.table, self.rank, self.n = table, rank, n
        self.numbers, self.text = dict(numbers), dict(text or {})
        self.spill, self.spilled = spill, list(spilled)

    def null_columns(self) -> set[str]:
        """The columns that may hold a NULL, known before any batch is built: those with a NULL
        mask that marks a row, an Arrow column with a null, a text column with a None value,
        the spill's columns that held one, and every column given nowhere (all NULL)."""
        import numpy as np

        given = {"rank", *self.numbers, *self.text, *self.spilled}  # rank: always filled
        out = {c for c in columns(self.table) if c not in given}
        for c, (values, mask) in self.numbers.items():
            if (mask is not None and bool(np.any(mask))) or (
                not isinstance(values, np.ndarray) and values.null_count
            ):
                out.add(c)
        out |= {c for c, (values, _) in self.text.items() if any(v is None for v in values)}
        out |= self.spill.null_columns() & set(self.spilled)
        return out

    def tables(self, size: int) -> Iterator[pa.Table]:
        import numpy as np

        spilled = self.spill.batches(size)
        for a in range(0, self.n, size):
            b = min(self.n, a + size)
            nums: dict[str, tuple[Any, np.ndarray | None]] = {
                c: (_cut(v, a, b), None if m is None else m[a:b])
                for c, (v, m) in self.numbers.items()
            }
            part = next(spilled)
            if part.num_rows != b - a:
                raise MlaprofError(f"internal: spilled batch of {part.num_rows}, not {b - a}")
            for c in self.spilled:
                nums[c] = (part.column(c), None)  # int64 with its own NULLs
            text = {}
            for c, (values, idx) in self.text.items():
                # only this batch's distinct values: a row group's dictionary is its own
                uniq, inv = _distinct_codes(np.asarray(idx[a:b]), len(values))
                text[c] = ([values[i] for i in uniq.tolist()], inv)
            yield build(self.table, self.rank, b - a, nums, text)
        self.spill.discard()


def _distinct_codes(idx: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(idx, return_inverse=True)`` for codes into ``size`` values, counted instead
    of sorted (a sort per row group of a million-row file costs more than the rest of its
    build)."""
    import numpy as np

    if not len(idx) or size > 4 * len(idx) + 1024 or idx.min() < 0:  # few rows of many values
        uniq, inv = np.unique(idx, return_inverse=True)
        return uniq, inv.reshape(-1)
    present = np.bincount(idx, minlength=size) > 0
    uniq = np.flatnonzero(present)
    if len(uniq) == size:  # every value present: each code is its own place (no copy)
        return uniq, idx
    # int32, as the dictionary's indices are written: no conversion after
    rank = np.cumsum(present, dtype=np.int32) - 1
    return uniq, rank[idx]


def _cut(values: Any, a: int, b: int) -> Any:
    """Rows ``a:b`` of a NumPy or Arrow (chunked) array."""
    import numpy as np

    return values[a:b] if isinstance(values, np.ndarray) else values.slice(a, b - a)


def write(
    run_dir: Path,
    rank: int,
    table: str,
    parts: Sequence[pa.Table | Pending],
    host: str | None = None,
) -> SideTable:
    """Write the parts, in order, as the rank's side file of ``table`` (a :class:`Pending` one
    built and written a batch at a time)."""
    from mlaprof.store.schema import SCHEMA_VERSION

    pa = _pa()
    meta = {
        "mlaprof.table": table,
        "mlaprof.schema_version": str(SCHEMA_VERSION),
        "mlaprof.layout_version": str(LAYOUT_VERSION),
    }
    path = Path(run_dir) / file_name(rank, table, host)
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = arrow_schema(table).with_metadata(meta)
    text = [f.name for f in schema if pa.types.is_dictionary(f.type)]
    # dictionary pages for text; times (``*_ns``: epoch nanoseconds, growing by small steps)
    # delta-encoded, ~14x smaller than plain pages; the other integers (steps, ids, grids:
    # small values in long runs) plain, which LZ4 shrinks as well and which costs half the CPU
    # to write (a 1M-dispatch kernel file: 103 instead of 136 ms, 2.8 instead of 0.9 MB, the
    # fleet report's scans as fast)
    times = [f.name for f in schema if pa.types.is_integer(f.type) and f.name.endswith("_ns")]
    options = {
        "compression": "lz4",
        "use_dictionary": text,
        "column_encoding": dict.fromkeys(times, "DELTA_BINARY_PACKED"),
    }
    if all(isinstance(p, pa.Table) for p in parts):
        tab = pa.concat_tables(parts).unify_dictionaries()
        nulls = {c for c in tab.column_names if tab.column(c).null_count}
        tab = pa.Table.from_arrays(tab.columns, schema=_declared(schema, nulls))
        pa.parquet.write_table(tab, str(path), row_group_size=BATCH_ROWS, **options)
        return SideTable(table, path, tab.num_rows)
    nulls = set().union(*(p.null_columns() if isinstance(p, Pending)
                          else {c for c in p.column_names if p.column(c).null_count}
                          for p in parts))  # fmt: skip
    schema = _declared(schema, nulls)
    n = 0
    with pa.parquet.ParquetWriter(str(path), schema, **options) as out:
        for p in parts:
            for tab in p.tables(BATCH_ROWS) if isinstance(p, Pending) else [p]:
                out.write_table(pa.Table.from_arrays(tab.columns, schema=schema),
                                row_group_size=BATCH_ROWS)  # fmt: skip
                n += tab.num_rows
    return SideTable(table, path, n)


def _declared(schema: pa.Schema, nulls: set[str]) -> pa.Schema:
    """``schema`` with every column outside ``nulls`` declared NOT NULL: Parquet then writes
    no definition levels for it (a quarter of a kernel file's write CPU). Readers see the same
    values; the writer refuses a NULL in such a column, so a wrong declaration fails the
    import instead of storing a wrong file."""
    return _pa().schema(
        [f if f.name in nulls else f.with_nullable(False) for f in schema], metadata=schema.metadata
    )


def record(con: sqlite3.Connection, side: SideTable, run_dir: Path) -> None:
    """Name the file, relative to the run folder, in the rank database (inside the caller's
    transaction)."""
    rel = side.path.relative_to(run_dir).as_posix()
    con.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (META_PREFIX + side.table, json.dumps({"file": rel, "rows": side.rows})),
    )


def _inside(run_dir: Path, name: str) -> Path | None:
    """``name`` as a file inside the run folder, or None (absolute, ``..``, or a link out)."""
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\\" in name:
        return None
    path = Path(run_dir).joinpath(*parts)
    try:
        path.resolve().relative_to(Path(run_dir).resolve())
    except ValueError:
        return None
    return path


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
        path = _inside(run_dir, name)
        if table not in TABLES or path is None or not path.is_file():
            raise MlaprofError(f"{run_dir} is incomplete: {name} ({table} rows) is missing")
        out[table] = SideTable(table, path, n)
    return out


def read(side: SideTable) -> pa.Table:
    """The file as an Arrow table, checked against the schema and the recorded row count."""
    pa = _pa()
    try:
        if side.path.suffix == ".arrow":  # runs imported before Parquet
            with pa.memory_map(str(side.path)) as src:
                tab = pa.ipc.open_file(src).read_all()
        else:
            tab = pa.parquet.read_table(str(side.path), memory_map=True)
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable columnar file ({e})") from None
    if tab.schema.names != list(columns(side.table)) or tab.num_rows != side.rows:
        raise MlaprofError(
            f"{side.path} does not hold the recorded {side.rows} {side.table} rows "
            f"({tab.num_rows} rows, columns {', '.join(tab.schema.names)})"
        )
    return tab


def read_columns(side: SideTable, cols: list[str]) -> pa.Table:
    """Only ``cols`` of the file (Parquet reads just those column chunks), unchecked beyond
    their presence: for analyses of large imports that need a few columns."""
    pa = _pa()
    missing = [c for c in cols if c not in columns(side.table)]
    if missing:
        raise MlaprofError(
            f"table {side.table!r} has no {plural('column(s)', len(missing))} {', '.join(missing)}"
        )
    try:
        if side.path.suffix == ".arrow":
            with pa.memory_map(str(side.path)) as src:
                return pa.ipc.open_file(src).read_all().select(cols)
        return pa.parquet.read_table(str(side.path), columns=cols, memory_map=True)
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable columnar file ({e})") from None


def _plain(tab: pa.Table) -> pa.Table:
    """Dictionary columns decoded to plain strings (what SQLite returns)."""
    pa = _pa()
    for i, field in enumerate(tab.schema):
        if pa.types.is_dictionary(field.type):
            tab = tab.set_column(i, field.name, tab.column(i).cast(pa.string()))
    return tab


def frame(side: SideTable) -> pd.DataFrame:
    """The rows as a DataFrame typed as pandas reads a SQLite query's (:func:`as_pandas`); the
    Arrow table is freed column by column as it converts (a 10M-kernel import's 2.7M layers
    would otherwise be held twice, as Arrow and as pandas), and what Arrow's pool kept of it is
    handed back to the system."""
    df = as_pandas(read(side), consume=True)
    _pa().default_memory_pool().release_unused()
    return df


def as_pandas(tab: pa.Table, consume: bool = False) -> pd.DataFrame:
    """An Arrow table as ``pandas.read_sql_query`` would give the same rows from SQLite: text as
    strings, integers with NULLs as floats, a column of NULLs only (or an empty table's) as
    objects holding None. Database rows read through Arrow and side files share it, so a table
    reads the same wherever its rows are stored. ``consume``: the caller holds no other
    reference to ``tab``, whose memory is released during the conversion."""
    import numpy as np
    import pandas as pd

    if tab.num_rows == 0:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in tab.column_names})
    tab = _plain(tab)
    n = tab.num_rows
    empty = [c for c in tab.column_names if tab.column(c).null_count == n]
    df = tab.to_pandas(split_blocks=True, self_destruct=True) if consume else tab.to_pandas()
    del tab
    for c in empty:
        df[c] = pd.Series(np.full(n, None, dtype=object), index=df.index)
    return df


ROW_BATCH = 65_536  # rows turned into Python objects at a time by :func:`rows`


def rows(side: SideTable) -> Iterator[tuple[Any, ...]]:
    """Exact rows (Python ints and None), in file order, read and turned into Python one batch
    of at most ``ROW_BATCH`` rows at a time: memory holds one batch, never the whole file (an
    exporter of a 1M-kernel import used to hold every row as Python objects at once)."""
    pa = _pa()
    if side.path.suffix == ".arrow":  # runs imported before Parquet: memory-mapped, checked
        yield from _batch_rows(iter(read(side).to_batches()))
        return
    _check_rows(side)
    try:
        pf = pa.parquet.ParquetFile(str(side.path), memory_map=True)
        yield from _batch_rows(pf.iter_batches(batch_size=ROW_BATCH))
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable columnar file ({e})") from None


def batches(side: SideTable, columns: list[str]) -> Iterator[Any]:
    """``columns`` of the rows as Arrow record batches of at most ``ROW_BATCH`` rows, in file
    order (checked as :func:`rows` checks them): nothing turned into Python objects."""
    pa = _pa()
    if side.path.suffix == ".arrow":  # runs imported before Parquet: memory-mapped, checked
        yield from read(side).select(columns).to_batches(max_chunksize=ROW_BATCH)
        return
    _check_rows(side)
    try:
        pf = pa.parquet.ParquetFile(str(side.path), memory_map=True)
        yield from pf.iter_batches(batch_size=ROW_BATCH, columns=columns)
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable columnar file ({e})") from None


def _check_rows(side: SideTable) -> None:
    """The file's schema and row count against the record, from its footer alone."""
    pa = _pa()
    try:
        meta = pa.parquet.ParquetFile(str(side.path), memory_map=True).metadata
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{side.path} is not a readable columnar file ({e})") from None
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    if names != list(columns(side.table)) or meta.num_rows != side.rows:
        raise MlaprofError(
            f"{side.path} does not hold the recorded {side.rows} {side.table} rows "
            f"({meta.num_rows} rows, columns {', '.join(names)})"
        )


def _batch_rows(batches: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    pa = _pa()
    for batch in batches:
        for start in range(0, batch.num_rows, ROW_BATCH):
            part = pa.Table.from_batches([batch.slice(start, ROW_BATCH)])
            yield from zip(*(col.to_pylist() for col in _plain(part).columns), strict=True)

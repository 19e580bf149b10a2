"""Fast multi-row inserts of column arrays into a rank database (imports and TEMP copies).

Python's ``sqlite3`` pays per statement and per bound value: rows go in as multi-row
``INSERT ... VALUES (...), (...)`` statements, constant columns as SQL literals, and the next
chunk's Python values are built in a helper thread while SQLite steps the current chunk (the
module releases the GIL while it steps).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import plural
from mlaprof.store.schema import TABLES


def _check_columns(table: str, names: Sequence[str]) -> None:
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    known = {c for c, _ in TABLES[table]}
    bad = [c for c in names if c not in known]
    if bad:
        raise MlaprofError(
            f"table {table!r} has no {plural('column(s)', len(bad))} {', '.join(bad)}"
        )


class _Statements:
    """``INSERT INTO schema.table (rank, names...) VALUES (row), (row), ...`` with ``width``
    bound values per row after the row's constant ``literals``."""

    def __init__(
        self, con: sqlite3.Connection, schema: str, table: str, rank: int,
        names: Sequence[str], literals: Sequence[str], width: int,
    ) -> None:  # fmt: skip
        self.con, self.table, self.width = con, table, width
        self.prefix = (
            f"INSERT INTO {schema}.{table} (rank{''.join(', ' + c for c in names)}) VALUES "
        )
        self.one = "(" + ", ".join([str(int(rank)), *literals] + ["?"] * width) + ")"
        # SQLite binds at most 32766 values per statement
        self.per = max(1, min(1024, 32000 // max(1, width)))
        self.full = self.prefix + ", ".join([self.one] * self.per)

    def run(self, flat: list[Any], rows: int) -> None:
        """Insert ``rows`` rows whose bound values are one flat row-major list."""
        full, rest = divmod(rows, self.per)
        step = self.per * self.width
        ex = self.con.execute
        try:
            for i in range(full):
                ex(self.full, flat[i * step : (i + 1) * step])
            if rest:
                ex(self.prefix + ", ".join([self.one] * rest), flat[full * step :])
        except (sqlite3.Error, OverflowError) as e:
            # a value of a type (or size) SQLite cannot store came from the input
            raise MlaprofError(f"cannot store a {self.table} record: {e}") from None


def insert_flat(
    con: sqlite3.Connection, table: str, rank: int, cols: Sequence[str], flat: list[Any]
) -> int:
    """Insert rows given as one flat row-major list (len = rows * len(cols)); returns the rows."""
    nc = len(cols)
    if nc == 0 or len(flat) % nc:
        raise MlaprofError(f"internal: {len(flat)} values do not fill rows of {nc} columns")
    _check_columns(table, cols)
    _Statements(con, "main", table, rank, cols, (), nc).run(flat, len(flat) // nc)
    return len(flat) // nc


def insert_columns(
    con: sqlite3.Connection,
    table: str,
    rank: int,
    columns: Mapping[str, tuple[np.ndarray, np.ndarray | None]],
    n: int,
    text: Mapping[str, str] | None = None,
    schema: str = "main",
) -> None:
    """Insert ``n`` rows of ``table`` (in database ``schema``: main or temp) given as column
    arrays with optional NULL masks; ``text`` columns are one constant string each. ``rank`` is
    written as a constant.

    Columns that are all NULL or one constant integer are written as SQL literals (fewer values
    to bind); the rest are bound chunk by chunk, so only one chunk of Python objects exists at
    a time, and the next chunk is built in a helper thread while SQLite steps this one.
    """
    if n == 0:
        return
    lits: list[tuple[str, str]] = [
        (c, "'" + v.replace("'", "''") + "'") for c, v in (text or {}).items()
    ]
    bound: list[tuple[str, np.ndarray, np.ndarray | None]] = []
    for c, (arr, mask) in columns.items():
        if len(arr) != n:
            raise MlaprofError(f"internal: column {c} has {len(arr)} values, not {n}")
        if mask is not None and mask.all():
            lits.append((c, "NULL"))
        elif (
            (mask is None or not mask.any())
            and arr.dtype.kind == "i"
            and bool((arr == arr[0]).all())
        ):
            lits.append((c, str(int(arr[0]))))
        else:
            bound.append((c, arr, mask if mask is not None and mask.any() else None))
    names = [c for c, _ in lits] + [c for c, _, _ in bound]
    _check_columns(table, names)
    width = len(bound)
    stmts = _Statements(con, schema, table, rank, names, [v for _, v in lits], width)
    chunk = stmts.per * 64

    def build(off: int) -> tuple[list[Any], int]:
        m = min(chunk, n - off)
        flat: list[Any] = [None] * (m * width)
        for j, (_, arr, mask) in enumerate(bound):
            vals = arr[off : off + m].tolist()
            if mask is not None:
                for i in np.flatnonzero(mask[off : off + m]).tolist():
                    vals[i] = None
            flat[j::width] = vals
        return flat, m

    with ThreadPoolExecutor(1) as pool:
        nxt = pool.submit(build, 0)
        for off in range(0, n, chunk):
            flat, m = nxt.result()
            if off + chunk < n:
                nxt = pool.submit(build, off + chunk)
            stmts.run(flat, m)

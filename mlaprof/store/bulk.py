"""Fast multi-row inserts of column arrays into a rank database (imports and TEMP copies).

Python's ``sqlite3`` pays per statement and per bound value: rows go in as multi-row
``INSERT ... VALUES (...), (...)`` statements, constant columns as SQL literals, and the next
chunk's Python values are built in a helper thread while SQLite steps the current chunk (the
module releases the GIL while it steps).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.store.schema import TABLES


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
    a time.
    """
    if n == 0:
        return
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
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
    known = {c for c, _ in TABLES[table]}
    bad = [c for c in names if c not in known]
    if bad:
        raise MlaprofError(f"table {table!r} has no column(s) {', '.join(bad)}")
    k = max(1, len(bound))
    per = max(1, min(1024, 32000 // k))
    prefix = f"INSERT INTO {schema}.{table} (rank{''.join(', ' + c for c in names)}) VALUES "
    one = "(" + ", ".join([str(int(rank))] + [v for _, v in lits] + ["?"] * len(bound)) + ")"
    sql_full = prefix + ", ".join([one] * per)
    chunk = per * 64
    width = len(bound)

    def build(off: int) -> tuple[int, list[Any]]:
        m = min(chunk, n - off)
        flat: list[Any] = [None] * (m * width)
        for j, (_, arr, mask) in enumerate(bound):
            vals = arr[off : off + m].tolist()
            if mask is not None:
                for i in np.flatnonzero(mask[off : off + m]).tolist():
                    vals[i] = None
            flat[j::width] = vals
        return m, flat

    ex = con.execute
    with ThreadPoolExecutor(1) as pool:
        nxt = pool.submit(build, 0)
        try:
            for off in range(0, n, chunk):
                m, flat = nxt.result()
                if off + chunk < n:
                    nxt = pool.submit(build, off + chunk)
                full, rest = divmod(m, per)
                step = per * width
                for i in range(full):
                    ex(sql_full, flat[i * step : (i + 1) * step])
                if rest:
                    ex(prefix + ", ".join([one] * rest), flat[full * step :])
        except sqlite3.Error as e:
            raise MlaprofError(f"cannot store a {table} record: {e}") from None

"""Exact rows of a stored run, read straight from its rank databases.

The DataFrame API turns NULL integers into NaN floats; exporters need the stored integers
(nanosecond timestamps) bit for bit, so they read rows through their own read-only connections.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.store import columnar
from mlaprof.store.reader import Run
from mlaprof.store.schema import TABLES


def rows(run: Run, table: str) -> list[dict[str, Any]]:
    """``table``'s rows of every rank, in storage order, as dicts (``rank`` first); an import's
    Arrow-stored rows follow the database's."""
    if table not in TABLES:
        raise MlaprofError(f"unknown table {table!r}")
    cols = ["rank"] + [c for c, _ in TABLES[table]]
    out: list[dict[str, Any]] = []
    for rank in run.ranks:
        path = Path(run.path) / f"rank{rank}.db"
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                cur = con.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid")
                out.extend(dict(zip(cols, r, strict=True)) for r in cur)
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            raise MlaprofError(f"{path} cannot be read: {e}") from None
        side = run.side_tables(rank).get(table)
        if side is not None:  # an import's rows, after the database's
            out.extend(dict(zip(cols, r, strict=True)) for r in columnar.rows(side))
    return out

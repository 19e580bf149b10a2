"""Following a run while it is written: the committed rows of each rank since a position.

:class:`RunFollow` discovers rank databases as they appear, reads each rank's status and hands
out, per table, the rows committed past the last rowid it returned, already grouped in SQL (the
cost of a poll depends on what arrived, not on the run's size: rowid is the primary key).
The TUI (``tui.follower``) merges these batches into its aggregates; it never opens a database.
An import's rows kept in columnar side files (:mod:`.columnar`; written once, never appended to)
are handed out once, grouped by the same SQL run in DuckDB over the file, under rowids from
:data:`SIDE_ROWID` on.

Problems (run deleted, truncated, corrupted, another schema) raise :class:`FollowError` with one
readable line.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.formats import arrow_numpy
from mlaprof.store import columnar, liveness
from mlaprof.store.schema import TABLES, version_problem
from mlaprof.store.sqlengine import bounded, duckdb_module

_RANK_DB = re.compile(r"^rank(\d+)\.db$")
_R = "rowid > ? AND rowid <= ?"
Rows = list[tuple[Any, ...]]
RECENT = 512  # newest step rows handed out per batch (the TUI's sparkline window)
# row i of a side file reads as rowid SIDE_ROWID + i + 1: past any rowid SQLite hands out here
SIDE_ROWID = 1 << 48


# what reading a rank database being written (or damaged) can raise
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)


class FollowError(Exception):
    """The followed run cannot be read any more (deleted, truncated, corrupted)."""


@dataclass
class Batch:
    """The rows of ``table`` committed in rowids ``(lo, hi]`` of one rank, grouped per table
    (see the ``_group_*`` functions for each table's keys); ``count`` rows in all."""

    rank: int
    table: str
    lo: int
    hi: int
    count: int
    groups: dict[str, Any]


class RunFollow:
    """Read-only follower of one run folder (not thread-safe: the caller holds a lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._cons: dict[int, sqlite3.Connection] = {}
        self._pos: dict[tuple[int, str], int] = {}
        self._sides: dict[int, dict[str, columnar.SideTable]] = {}
        self._side_dbs: dict[tuple[int, str], Any] = {}  # (rank, table) -> DuckDB over the file
        self._duck: Any = None  # one DuckDB database; each side file gets a cursor of it
        self._seen_folder = False
        self.cut = False  # a batch was cut at ``chunk``: more committed rows wait

    # -- the folder ----------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the folder is there; raises once a folder seen before is gone."""
        if self.path.is_dir():
            self._seen_folder = True
            return True
        if self._seen_folder:
            raise FollowError(f"run {self.path.name} was deleted")
        return False

    def read_meta(self, had: bool) -> dict[str, Any] | None:
        """run.json, or ``None`` while it is missing or (``had``: known before) being rewritten."""
        p = self.path / "run.json"
        try:
            doc = json.loads(p.read_text())
        except FileNotFoundError:
            if had:
                raise FollowError(f"run.json of {self.path.name} was deleted") from None
            return None
        except (UnicodeDecodeError, json.JSONDecodeError):
            if had:
                return None  # being rewritten atomically elsewhere; keep the old one
            raise FollowError(f"{p} is corrupt (not JSON)") from None
        if not isinstance(doc, dict):
            raise FollowError(f"{p} is corrupt: expected a JSON object")
        problem = version_problem(doc.get("schema_version"), self.path.name)
        if problem:
            raise FollowError(problem)
        return doc

    def discover(self) -> dict[int, dict[str, int]]:
        """Open rank databases that appeared since the last call; ``{rank: {table: rows}}`` of
        their immutable columnar side tables (an import's kernels and layers: counted here, never
        polled; the layers are grouped once by :meth:`new_rows`)."""
        found: dict[int, dict[str, int]] = {}
        for p in sorted(self.path.iterdir()):
            m = _RANK_DB.match(p.name)
            if not m or int(m.group(1)) in self._cons:
                continue
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True, check_same_thread=False)
            ver = con.execute("PRAGMA user_version").fetchone()[0]
            if ver == 0:
                con.close()  # the writer has not committed its tables yet
                continue
            problem = version_problem(ver, p.name)
            if problem:
                con.close()
                raise FollowError(problem)
            try:
                sides = columnar.side_tables(con, self.path)
            except MlaprofError as e:
                con.close()
                raise FollowError(str(e)) from None
            rank = int(m.group(1))
            self._cons[rank] = con
            self._sides[rank] = sides
            found[rank] = {t: s.rows for t, s in sides.items()}
        return found

    @property
    def ranks(self) -> list[int]:
        return sorted(self._cons)

    def status(self, rank: int) -> str:
        """The rank's writer status (running, finished, failed, ...); a "running" rank whose
        writer lock is free died: ``incomplete`` (:mod:`mlaprof.store.liveness`)."""
        con = self._con(rank)
        meta = dict(con.execute("SELECT key, value FROM meta WHERE key IN ('status', ?)",
                                (liveness.DRAINED,)).fetchall())  # fmt: skip
        return liveness.effective_status(
            self.path, rank, meta.get("status"), drained=meta.get(liveness.DRAINED)
        )

    # -- committed rows since a position -------------------------------------------------------
    def position(self, rank: int, table: str) -> int:
        """The last rowid of ``table`` handed out for ``rank``."""
        return self._pos.get((rank, table), 0)

    def new_rows(self, rank: int, chunk: int) -> Iterator[Batch]:
        """One batch per table with rows committed past its position (at most ``chunk`` rowids
        per table and call, so catching up on a huge run happens in slices; :attr:`cut` says
        a slice was cut)."""
        con = self._con(rank)
        for table in TABLES:
            hi = con.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
            lo = self.position(rank, table)
            if hi < lo:
                raise FollowError(f"rank{rank}.db of {self.path.name} was truncated ({table})")
            if hi == lo:
                continue
            if hi - lo > chunk:
                hi = lo + chunk
                self.cut = True
            count = con.execute(f"SELECT COUNT(*) FROM {table} WHERE {_R}", (lo, hi)).fetchone()
            groups = _GROUPS[table](con, lo, hi) if table in _GROUPS else {}
            self._pos[(rank, table)] = hi
            yield Batch(rank, table, lo, hi, count[0], groups)
        yield from self._side_batches(rank)

    def _side_batches(self, rank: int) -> Iterator[Batch]:
        """Each side file the live view groups, once (its rows were counted at discovery): the
        table's own grouping SQL, run by DuckDB over the file with row ``i`` as rowid
        ``SIDE_ROWID + i + 1``."""
        for table, side in self._sides.get(rank, {}).items():
            if table not in _GROUPS or (rank, table) in self._side_dbs:
                continue
            if self._duck is None:
                self._duck = duckdb_module().connect(config=bounded())
            db = _side_db(self._duck.cursor(), side)
            self._side_dbs[(rank, table)] = db
            yield Batch(rank, table, SIDE_ROWID, SIDE_ROWID + side.rows, 0,
                        _GROUPS[table](db, SIDE_ROWID, SIDE_ROWID + side.rows))  # fmt: skip

    def step_layers(self, rank: int, lo: int, hi: int, step: int) -> Rows:
        """``(layer, duration_ns, syncs, splits_used, splits_deserved)`` of one step, found
        through a rowid range seen in a batch (``layer_rowids``)."""
        side = self._side_dbs.get((rank, "layers")) if lo > SIDE_ROWID else None
        return (
            (side or self._con(rank))
            .execute(
                f"SELECT {', '.join(_STEP_LAYER_COLS)} FROM layers "
                "WHERE rowid >= ? AND rowid <= ? AND step = ?",
                (lo, hi, step),
            )
            .fetchall()
        )

    def _con(self, rank: int) -> sqlite3.Connection:
        db = self.path / f"rank{rank}.db"
        if not db.exists():
            raise FollowError(f"{db.name} of run {self.path.name} was deleted")
        return self._cons[rank]

    def close(self) -> None:
        for con in [*self._cons.values(), *self._side_dbs.values()]:
            con.close()
        if self._duck is not None:
            self._duck.close()
        self._cons.clear()
        self._side_dbs.clear()
        self._duck = None


def _side_db(db: Any, side: columnar.SideTable) -> Any:
    """``db`` (a DuckDB cursor) with ``side.table`` as the file's rows and a ``rowid`` column
    (``SIDE_ROWID + 1`` on): the SQL the follower runs on a database runs on it unchanged."""
    import pyarrow as pa

    try:  # only the columns the grouping SQL reads (an 11M-kernel import's layers are large)
        cols = _SIDE_COLUMNS.get(side.table)
        tab = columnar.read(side) if cols is None else columnar.read_columns(side, list(cols))
    except MlaprofError as e:
        raise FollowError(str(e)) from None
    first = SIDE_ROWID + 1
    rowid = arrow_numpy.array(np.arange(first, first + tab.num_rows, dtype=np.int64), pa.int64())
    db.register(side.table, tab.append_column("rowid", rowid))
    return db


_STEP_LAYER_COLS = ("layer", "duration_ns", "syncs", "splits_used", "splits_deserved")
# the columns of a side table that the grouping SQL (_GROUPS) and step_layers read
_SIDE_COLUMNS = {
    "layers": ("step", *_STEP_LAYER_COLS),
    "steps": ("step", "duration_ns", "graph_mode", "num_reqs", "num_real_reqs",
              "padded_tokens", "backend", "timing"),
}  # fmt: skip


# -- per-table grouping over a rowid range -----------------------------------------------------
def _steps(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
    return {
        "agg": con.execute(
            "SELECT COUNT(*), SUM(duration_ns), MIN(duration_ns), MAX(duration_ns) FROM steps "
            f"WHERE {_R}",
            (lo, hi),
        ).fetchone(),
        # the newest rows, oldest first (the caller keeps a window of recent steps)
        "tail": con.execute(
            "SELECT step, duration_ns, graph_mode, num_reqs, num_real_reqs, padded_tokens, "
            f"backend, timing FROM steps WHERE {_R} ORDER BY rowid DESC LIMIT ?",
            (lo, hi, RECENT),
        ).fetchall()[::-1],
        "modes": con.execute(
            f"SELECT graph_mode, COUNT(*) FROM steps WHERE {_R} GROUP BY graph_mode", (lo, hi)
        ).fetchall(),
        "step_ids": [
            s for (s,) in con.execute(f"SELECT step FROM steps WHERE {_R} ORDER BY rowid", (lo, hi))
        ],
    }


def _layers(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
    return {
        "sums": con.execute(
            "SELECT layer, COUNT(*), SUM(duration_ns), SUM(syncs) "
            f"FROM layers WHERE {_R} GROUP BY layer",
            (lo, hi),
        ).fetchall(),
        # (layer, used, deserved, n): few distinct pairs; the caller applies the verdicts
        "splits": con.execute(
            "SELECT layer, splits_used, splits_deserved, COUNT(*) FROM layers "
            f"WHERE {_R} GROUP BY layer, splits_used, splits_deserved",
            (lo, hi),
        ).fetchall(),
        "last": con.execute(
            "SELECT layer, splits_used, splits_deserved FROM layers WHERE rowid IN "
            f"(SELECT MAX(rowid) FROM layers WHERE {_R} GROUP BY layer)",
            (lo, hi),
        ).fetchall(),
        "rowids": con.execute(
            f"SELECT step, MIN(rowid), MAX(rowid) FROM layers WHERE {_R} GROUP BY step", (lo, hi)
        ).fetchall(),
    }


def _syncs(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
    return {
        "sites": con.execute(
            "SELECT layer, kind, op, location, function, COUNT(*), MIN(step), MAX(detail) "
            f"FROM syncs WHERE {_R} GROUP BY layer, kind, op, location, function",
            (lo, hi),
        ).fetchall()
    }


_SPLIT_LAST = (
    "capture_size, policy, step, used, deserved, frozen, min_kv_used, min_kv_deserved, "
    "occupancy_used, occupancy_deserved, target, note"
)


def _splits(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
    cur = con.execute(
        f"SELECT {_SPLIT_LAST} FROM splits WHERE rowid IN "
        f"(SELECT MAX(rowid) FROM splits WHERE {_R} GROUP BY capture_size, policy)",
        (lo, hi),
    )
    names = [d[0] for d in cur.description]
    return {
        # (capture_size, policy, used, deserved, n): the caller applies the verdicts
        "pairs": con.execute(
            "SELECT capture_size, policy, used, deserved, COUNT(*) "
            f"FROM splits WHERE {_R} GROUP BY capture_size, policy, used, deserved",
            (lo, hi),
        ).fetchall(),
        "last": [dict(zip(names, r, strict=True)) for r in cur.fetchall()],
    }


PADDING_SUMS = (
    "steps",
    "real_rows",
    "padding_rows",
    "real_tokens",
    "padding_tokens",
    "kv_bytes_real",
    "kv_bytes_padding",
)


def _padding(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
    return {
        "sums": con.execute(
            "SELECT capture_size, COUNT(*), SUM(real_rows), SUM(padding_rows), SUM(real_tokens), "
            "SUM(padding_tokens), SUM(kv_bytes_real), SUM(kv_bytes_padding) "
            f"FROM padding WHERE {_R} GROUP BY capture_size",
            (lo, hi),
        ).fetchall()
    }


def _whole(table: str) -> Callable[[sqlite3.Connection, int, int], dict[str, Any]]:
    """Small tables (memory, captures): every new row as a dict, oldest first."""

    def read(con: sqlite3.Connection, lo: int, hi: int) -> dict[str, Any]:
        cur = con.execute(f"SELECT * FROM {table} WHERE {_R} ORDER BY rowid", (lo, hi))
        names = [d[0] for d in cur.description]
        return {"rows": [dict(zip(names, r, strict=True)) for r in cur.fetchall()]}

    return read


_GROUPS: dict[str, Callable[[sqlite3.Connection, int, int], dict[str, Any]]] = {
    "steps": _steps,
    "layers": _layers,
    "syncs": _syncs,
    "splits": _splits,
    "padding": _padding,
    "memory": _whole("memory"),
    "captures": _whole("captures"),
}

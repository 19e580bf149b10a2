"""Following a run while it is written: the rows each database committed since a row id.

:class:`RunFollow` discovers the run's databases as they appear (``rank<N>.db`` per rank and
``rank<N>.<role>.db`` for its other processes, e.g. the vLLM EngineCore's scheduler records),
reads each one's status and hands out, per table, the rows committed past the last rowid it
returned, whole and in rowid order (rowid is the primary key: a poll costs what arrived, not the
run's size). It does not group or judge them: :mod:`mlaprof.analysis.live` folds them with the
analysis' own rules. An import's rows kept in columnar side files (:mod:`.columnar`; written
once, never appended to) are handed out once, under rowids from :data:`SIDE_ROWID` on.

Problems (run deleted, truncated, corrupted, another schema) raise :class:`FollowError` with one
readable line.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from mlaprof.errors import MlaprofError
from mlaprof.store import columnar, integrity, liveness
from mlaprof.store.schema import TABLES, columns, lacking_tables, version_problem
from mlaprof.store.writer import rank_db_name

_DB = re.compile(r"^rank(\d+)(?:\.([a-z]+))?\.db$")  # rank<N>[.<role>].db
# the meta keys of a database the analysis reads (Run.rank_meta), kept by the live fold: the
# card its rank measured on, the rule that named a scheduler database's rank
# (vllm_names.RANK_SOURCE_KEY)
KEPT_META = ("device_name", "rank_source")
# row i of a side file reads as rowid SIDE_ROWID + i + 1: past any rowid SQLite hands out here
SIDE_ROWID = 1 << 48
Key = tuple[int, str]  # (rank, role); role "" is the rank's own (worker) process


# what reading a rank database being written (or damaged) can raise
DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)


class FollowError(Exception):
    """The followed run cannot be read any more (deleted, truncated, corrupted)."""


class RunReplaced(FollowError):
    """The folder now holds another run than the one followed (deleted and recorded again under
    the same name): the caller starts over on the new one."""


@dataclass
class Rows:
    """The rows of ``table`` that database ``key`` committed in rowids ``(lo, hi]``, every
    column of the schema, in rowid order (``rank`` is the database's rank); a table the caller
    only counts comes as ``count`` alone."""

    key: Key
    table: str
    lo: int
    hi: int
    frame: pd.DataFrame  # empty for a table the caller only counts
    count: int  # rows in the range


class RunFollow:
    """Read-only follower of one run folder (not thread-safe: the caller holds a lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._cons: dict[Key, sqlite3.Connection] = {}
        self._pos: dict[tuple[Key, str], int] = {}
        self._sides: dict[Key, dict[str, columnar.SideTable]] = {}
        self._sides_read: set[tuple[Key, str]] = set()
        self._seen_folder = False
        # who the followed run is, not its name: the folder's and each database's inode and
        # run.json's run id / creation stamp; a change means another run took the name
        self._folder_id: tuple[int, int] | None = None
        self._run_id: tuple[Any, Any] | None = None
        self._db_ids: dict[Key, tuple[int, int]] = {}
        self._meta_sig: tuple[int, ...] | None = None  # run.json's stat when last read
        self.cut = False  # a read was cut at ``limit``: more committed rows wait

    # -- the folder ----------------------------------------------------------------------------
    def exists(self) -> bool:
        """Whether the folder is there; raises once a folder seen before is gone."""
        try:
            st = self.path.stat()
        except OSError:
            st = None
        if st is not None and self.path.is_dir():
            ident = (st.st_dev, st.st_ino)
            if self._folder_id is not None and ident != self._folder_id:
                raise RunReplaced(f"run {self.path.name} was replaced by another run")
            self._folder_id = ident
            self._seen_folder = True
            return True
        if self._seen_folder:
            raise FollowError(f"run {self.path.name} was deleted")
        return False

    def meta_changed(self) -> bool:
        """Whether run.json was rewritten (or replaced) since :meth:`read_meta` last read it: a
        stat per poll, so that another run's run.json is seen at once, not every few polls."""
        try:
            return _sig(self.path / "run.json") != self._meta_sig
        except OSError:
            return True

    def read_meta(self, had: bool) -> dict[str, Any] | None:
        """run.json, or ``None`` while it is missing or (``had``: known before) being rewritten."""
        p = self.path / "run.json"
        try:
            sig = _sig(p)
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
        ident = (doc.get("run_id"), doc.get("created"))
        if self._run_id is not None and ident != self._run_id:
            raise RunReplaced(f"run {self.path.name} was replaced by another run (run.json)")
        self._run_id = ident
        self._meta_sig = sig
        return doc

    def discover(self) -> list[Key]:
        """Open the databases that appeared since the last call; returns their keys."""
        found: list[Key] = []
        for p in sorted(self.path.iterdir()):
            m = _DB.match(p.name)
            key = (int(m.group(1)), m.group(2) or "") if m else None
            if key is None or key in self._cons:
                continue
            try:
                integrity.check_file(p)
            except MlaprofError as e:
                raise FollowError(str(e)) from None
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
                integrity.check_rows(con, p, key[0])
                sides = columnar.side_tables(con, self.path)
                integrity.check_sides(sides, p, key[0])
            except MlaprofError as e:
                con.close()
                raise FollowError(str(e)) from None
            self._cons[key] = con
            self._sides[key] = sides
            self._db_ids[key] = _file_id(p)
            found.append(key)
        return found

    def check(self, meta: Mapping[str, Any] | None) -> None:
        """The reader's rule for the folder (:func:`mlaprof.store.integrity.check_run`) over the
        databases discovered so far: rank databases without run.json (``meta`` None), a rank
        the run names missing, a run that says it ended without its databases."""
        try:
            integrity.check_run(self.path, meta, self.ranks)
        except MlaprofError as e:
            raise FollowError(str(e)) from None

    @property
    def databases(self) -> list[Key]:
        return sorted(self._cons)

    @property
    def ranks(self) -> list[int]:
        return sorted({rank for rank, _ in self._cons})

    def status(self, key: Key) -> str:
        """The database's writer status (running, finished, failed, ...); a "running" one
        whose writer lock is free died (:func:`mlaprof.store.liveness.effective_status`)."""
        return self.state(key)[0]

    def state(self, key: Key) -> tuple[str, str | None, bool, dict[str, str]]:
        """``(status, recorded reason, drained, kept meta)`` of the database (:meth:`status`;
        the :data:`KEPT_META` keys it holds: the card its rank measured on, ...)."""
        con = self._con(key)
        asked = ("status", "reason", liveness.DRAINED, *KEPT_META)
        meta = dict(con.execute(f"SELECT key, value FROM meta WHERE key IN "
                                f"({', '.join('?' * len(asked))})", asked).fetchall())  # fmt: skip
        status = liveness.effective_status(
            self.path, key[0], meta.get("status"), key[1], meta.get(liveness.DRAINED)
        )
        # drained and stopped without closing its record (a closed one has its own status)
        drained = meta.get(liveness.DRAINED) == "1" and meta.get("status") in liveness.LIVE
        return status, meta.get("reason"), drained, {k: meta[k] for k in KEPT_META if k in meta}

    # -- committed rows since a row id ---------------------------------------------------------
    def position(self, key: Key, table: str) -> int:
        """The last rowid of ``table`` handed out for database ``key``."""
        return self._pos.get((key, table), 0)

    def rows_since(
        self, key: Key, table: str, after: int, limit: int, count_only: bool = False
    ) -> Rows | None:
        """The rows of ``table`` that ``key`` committed past rowid ``after`` (at most ``limit``
        rowids: catching up on a huge run happens in slices, :attr:`cut` says one was cut);
        ``None`` when none. ``count_only``: how many, not the rows (all that are there)."""
        con = self._con(key)
        try:
            hi = con.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
        except sqlite3.OperationalError:
            if table in lacking_tables(con):  # written before the table existed: it holds no row
                return None
            raise
        if hi < after:
            raise FollowError(f"{rank_db_name(*key)} of {self.path.name} was truncated ({table})")
        if hi == after:
            return None
        if count_only:
            sql = f"SELECT COUNT(*) FROM {table} WHERE rowid > ? AND rowid <= ?"
            n = con.execute(sql, (after, hi)).fetchone()[0]
            return Rows(key, table, after, hi, pd.DataFrame(), n)
        if hi - after > limit:
            hi = after + limit
            self.cut = True
        cols = ", ".join(columns(table))
        frame = pd.read_sql_query(
            f"SELECT {cols} FROM {table} WHERE rowid > ? AND rowid <= ? ORDER BY rowid",
            con,
            params=(after, hi),
        )
        return Rows(key, table, after, hi, frame, len(frame))

    def new_rows(
        self, key: Key, limit: int, tables: Collection[str] = tuple(TABLES)
    ) -> Iterator[Rows]:
        """Per table, the rows committed past its position (then the position moves), and each
        columnar side table once; tables not in ``tables`` are only counted (an import's
        millions of kernels are never read for a count)."""
        for table in TABLES:
            got = self.rows_since(
                key, table, self.position(key, table), limit, count_only=table not in tables
            )
            if got is not None:
                self._pos[(key, table)] = got.hi
                yield got
        for table, side in self._sides.get(key, {}).items():
            if (key, table) in self._sides_read:
                continue
            self._sides_read.add((key, table))
            frame = pd.DataFrame()
            if table in tables:
                try:
                    frame = columnar.frame(side)
                except MlaprofError as e:
                    raise FollowError(str(e)) from None
            yield Rows(key, table, SIDE_ROWID, SIDE_ROWID + side.rows, frame, side.rows)

    def _con(self, key: Key) -> sqlite3.Connection:
        db = self.path / rank_db_name(*key)
        try:
            ident = _file_id(db)
        except FileNotFoundError:
            raise FollowError(f"{db.name} of run {self.path.name} was deleted") from None
        if ident != self._db_ids.get(key, ident):
            # the open connection still reads the old, unlinked file: another run's database
            raise RunReplaced(f"{db.name} of run {self.path.name} was replaced by another file")
        return self._cons[key]

    def close(self) -> None:
        for con in self._cons.values():
            con.close()
        self._cons.clear()


def _sig(path: Path) -> tuple[int, ...]:
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _file_id(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino

"""Writing a run: one SQLite database per rank in WAL mode, one committed transaction per record.

Why SQLite/WAL: readers (the TUI, a notebook) see every committed record while the writer goes on,
and a writer killed with SIGKILL loses at most the transaction in flight (the WAL is in the OS page
cache once the commit returns; ``synchronous=NORMAL`` only risks the tail on power loss).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.store import runmeta
from mlaprof.store.schema import SCHEMA_VERSION, TABLES, columns

ROLE = re.compile(r"[a-z]+")


def _create_tables(con: sqlite3.Connection) -> None:
    for table, cols in TABLES.items():
        body = ", ".join(["rank INTEGER NOT NULL"] + [f"{n} {t}" for n, t in cols])
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body})")
    con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")


class RunWriter:
    """Appends records of one rank to a run folder.

    Each :meth:`add` is one committed transaction (one record); :meth:`add_many` commits a group
    of records together (use it for records that only make sense whole, e.g. one step's layers).
    """

    def __init__(self, run_dir: Path, rank: int = 0, role: str = "") -> None:
        self.run_dir = Path(run_dir)
        self.rank = int(rank)
        self.role = role
        self.db_path = self.run_dir / rank_db_name(self.rank, role)
        if self.db_path.exists():
            raise MlaprofError(
                f"{self.db_path} already exists: refusing to overwrite a recorded rank"
            )
        self._con = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False)
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=NORMAL")
        self._con.execute("BEGIN")
        _create_tables(self._con)
        self._con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._set_meta_locked("status", "running")
        self._set_meta_locked("started", repr(time.time()))
        self._set_meta_locked("pid", str(os.getpid()))
        self._con.execute("COMMIT")
        self._sql: dict[str, str] = {}
        self._known: dict[str, frozenset[str]] = {}
        self.closed = False

    # -- records -------------------------------------------------------------------------------
    def _insert_sql(self, table: str) -> str:
        sql = self._sql.get(table)
        if sql is None:
            if table not in TABLES:
                raise MlaprofError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
            cols = columns(table)
            sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
            self._sql[table] = sql
        return sql

    def _values(self, table: str, row: Mapping[str, Any]) -> tuple[Any, ...]:
        cols = columns(table)
        known = self._known.get(table)
        if known is None:
            known = self._known[table] = frozenset(cols)
        if not row.keys() <= known:
            unknown = set(row) - known
            raise MlaprofError(f"table {table!r} has no column(s) {', '.join(sorted(unknown))}")
        get = row.get
        return tuple(self.rank if c == "rank" else _plain(get(c)) for c in cols)

    def add(self, table: str, **row: Any) -> None:
        """Append one record and commit it."""
        self._con.execute(self._insert_sql(table), self._values(table, row))

    def add_many(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append several records in one transaction; returns how many."""
        sql = self._insert_sql(table)
        values = [self._values(table, r) for r in rows]
        if not values:
            return 0
        self._con.execute("BEGIN")
        try:
            self._con.executemany(sql, values)
        except BaseException:
            self._con.execute("ROLLBACK")
            raise
        self._con.execute("COMMIT")
        return len(values)

    def transaction(self) -> _Transaction:
        """Group records of several tables into one commit: ``with w.transaction(): w.add(...)``."""
        return _Transaction(self)

    # -- run state -----------------------------------------------------------------------------
    def _set_meta_locked(self, key: str, value: str) -> None:
        self._con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def set_meta(self, key: str, value: Any) -> None:
        self._set_meta_locked(key, value if isinstance(value, str) else json.dumps(value))

    def finish(self, status: str = "finished") -> None:
        """Mark this rank done and fold the WAL into the main file (one self-contained .db)."""
        if self.closed:
            return
        self.set_meta("status", status)
        self.set_meta("finished", repr(time.time()))
        try:
            self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._con.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.OperationalError:
            pass  # a reader holds the WAL open; it stays in WAL mode, which is fine
        self._con.close()
        self.closed = True
        if self.rank == 0 and not self.role:
            runmeta.update(self.run_dir, status=status)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.finish("finished" if exc_type is None else "failed")


class _Transaction:
    def __init__(self, writer: RunWriter) -> None:
        self.w = writer

    def __enter__(self) -> RunWriter:
        self.w._con.execute("BEGIN")
        return self.w

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.w._con.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _plain(v: Any) -> Any:
    """SQLite takes int/float/str/None; convert numpy/torch scalars and bools."""
    if v is None or isinstance(v, (str, float)):
        return v
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    return str(v)


def rank_db_name(rank: int, role: str = "") -> str:
    """``rank<N>.db``, or ``rank<N>.<role>.db`` for a second process of the same rank (e.g. the
    vLLM EngineCore's scheduler beside its worker): every process writes its own database."""
    if role and not ROLE.fullmatch(role):
        raise MlaprofError(f"a writer role is lower-case letters, got {role!r}")
    return f"rank{int(rank)}.{role}.db" if role else f"rank{int(rank)}.db"


def create_run(
    traces_dir: Path | str,
    name: str,
    meta: Mapping[str, Any],
    rank: int = 0,
    role: str = "",
) -> RunWriter:
    """Create (or join, for ranks > 0 and other processes) a run folder; return the writer."""
    run_dir = runmeta.init_run_dir(Path(traces_dir), name, meta)
    return RunWriter(run_dir, rank, role)

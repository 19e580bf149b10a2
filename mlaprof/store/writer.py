"""Writing a run: one SQLite database per rank in WAL mode, one committed transaction per record.

Why SQLite/WAL: readers (the TUI, a notebook) see every committed record while the writer goes on,
and a writer killed with SIGKILL loses at most the transaction in flight (the WAL is in the OS page
cache once the commit returns; ``synchronous=NORMAL`` only risks the tail on power loss).

Crash safety at start: the writer first takes its rank's lock (:mod:`.liveness`), then writes the
run's run.json (a reader never finds a run.json with no live lock behind it: it would read the run
abandoned), then builds the database under a hidden temporary name and links it into place whole, so ``rank<N>.db`` never
exists without its tables and schema version. Every SQLite failure (disk full, read-only folder,
permissions) becomes one MlaprofError naming the database.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError, disk_message
from mlaprof.rank_counts import plural
from mlaprof.store import liveness, runmeta
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

    def __init__(
        self, run_dir: Path, rank: int = 0, role: str = "", meta: Mapping[str, Any] | None = None
    ) -> None:
        """``meta``: the run.json to write (or join) once the lock is held, so that a reader
        never finds the run without a live writer behind it (it would read abandoned)."""
        self.run_dir = Path(run_dir)
        self.rank = int(rank)
        self.role = role
        self.db_path = self.run_dir / rank_db_name(self.rank, role)
        self.closed = True  # until the database is in place
        if self.db_path.exists():
            raise _exists(self.db_path)
        self._lock = liveness.WriterLock(self.run_dir, self.rank, role)
        try:
            self._lock.reserve()  # room to record the end even if the disk fills up
            if meta is not None:
                runmeta.write_run_json(self.run_dir, meta)
            with self._guard("create"):
                _initialise(self.db_path)
                self._con = sqlite3.connect(
                    self.db_path, isolation_level=None, check_same_thread=False
                )
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("PRAGMA synchronous=NORMAL")
        except BaseException as e:
            self._lock.release()
            if isinstance(e, MlaprofError) and self.rank == 0 and not self.role:
                with contextlib.suppress(OSError, MlaprofError):  # the run says why it is empty
                    runmeta.update(self.run_dir, status="failed", reason=str(e))
            raise
        self._sql: dict[str, str] = {}
        self._known: dict[str, frozenset[str]] = {}
        self.closed = False

    @contextlib.contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """SQLite/OS failures (disk full, read-only, permissions) as one MlaprofError line."""
        try:
            yield
        except (sqlite3.Error, OSError) as e:
            where = self.db_path.parent
            raise MlaprofError(f"cannot {doing} {self.db_path}: {disk_message(e, where)}") from None

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
            raise MlaprofError(
                f"table {table!r} has no {plural('column(s)', len(unknown))} "
                f"{', '.join(sorted(unknown))}"
            )
        get = row.get
        return tuple(self.rank if c == "rank" else _plain(get(c)) for c in cols)

    def add(self, table: str, **row: Any) -> None:
        """Append one record and commit it (inside :meth:`transaction`: with the group)."""
        sql, values = self._insert_sql(table), self._values(table, row)
        with self._guard("write to"):
            self._con.execute(sql, values)

    def add_many(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append several records in one transaction; returns how many."""
        sql = self._insert_sql(table)
        values = [self._values(table, r) for r in rows]
        if not values:
            return 0
        with self.transaction(), self._guard("write to"):
            self._con.executemany(sql, values)
        return len(values)

    def transaction(self) -> _Transaction:
        """Group records of several tables into one commit: ``with w.transaction(): w.add(...)``."""
        return _Transaction(self)

    # -- run state -----------------------------------------------------------------------------
    def _set_meta_locked(self, key: str, value: str) -> None:
        self._con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def set_meta(self, key: str, value: Any) -> None:
        with self._guard("write to"):
            self._set_meta_locked(key, value if isinstance(value, str) else json.dumps(value))

    def finish(self, status: str = "finished", reason: str | None = None) -> None:
        """Mark this rank done and fold the WAL into the main file (one self-contained .db).

        Never raises for a store that cannot take the mark (full disk, read-only): the lock is
        released whatever happens, so readers then see the rank as ``incomplete``."""
        if self.closed:
            return
        self.closed = True
        self._lock.free_reserve()  # room for the marks below even on a disk that filled up
        try:
            with contextlib.suppress(sqlite3.Error, MlaprofError):
                if self._con.in_transaction:
                    self._con.execute("ROLLBACK")
                with self.transaction():
                    self._set_meta_locked("status", status)
                    self._set_meta_locked("finished", repr(time.time()))
                    if reason:
                        self._set_meta_locked("reason", reason)
            try:
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._con.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass  # a reader holds the WAL open (or the disk is full); WAL mode is fine
            self._con.close()
            if self.rank == 0 and not self.role:
                fields = {"status": status, **({"reason": reason} if reason else {})}
                with contextlib.suppress(OSError, MlaprofError):
                    runmeta.update(self.run_dir, **fields)
        finally:
            self._lock.release()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.finish("finished")
        else:
            self.finish("failed", str(exc) if isinstance(exc, MlaprofError) else None)


class _Transaction:
    def __init__(self, writer: RunWriter) -> None:
        self.w = writer

    def __enter__(self) -> RunWriter:
        with self.w._guard("write to"):
            self.w._con.execute("BEGIN")
        return self.w

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            with contextlib.suppress(sqlite3.Error):
                self.w._con.execute("ROLLBACK")
            return
        try:
            with self.w._guard("write to"):
                self.w._con.execute("COMMIT")
        except MlaprofError:
            with contextlib.suppress(sqlite3.Error):
                self.w._con.execute("ROLLBACK")
            raise


def _initialise(db_path: Path) -> None:
    """Build the empty database under a temporary name and link it into place whole."""
    tmp = db_path.with_name(f".{db_path.name}.{os.getpid()}.init")
    tmp.unlink(missing_ok=True)
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            # WAL before the file has its name: switching later writes a rollback journal, and a
            # writer killed then leaves a hot journal that a read-only reader cannot roll back
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("BEGIN")
            _create_tables(con)
            con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            meta = {"status": "running", "started": repr(time.time()), "pid": str(os.getpid())}
            con.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", meta.items())
            con.execute("COMMIT")
            # fold the WAL into the file now and check it did: closing would try the same but
            # hide a failure (a full disk), and the WAL is removed below; a half-folded file
            # linked into place read "database disk image is malformed"
            busy, log, done = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy or log != done or os.path.getsize(tmp.with_name(tmp.name + "-wal")):
                raise sqlite3.OperationalError("database or disk is full (checkpoint incomplete)")
            if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("database disk image is malformed")
        finally:
            con.close()
        _link_whole(tmp, db_path)  # the temporary WAL is folded and empty: one plain file
    finally:
        for p in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            p.unlink(missing_ok=True)


def _exists(db_path: Path) -> MlaprofError:
    return MlaprofError(f"{db_path} already exists: refusing to overwrite a recorded rank")


def _link_whole(tmp: Path, db_path: Path) -> None:
    """The finished temporary database put in place whole: a hard link is atomic, and refuses
    to replace a rank another writer made."""
    try:
        os.link(tmp, db_path)
    except FileExistsError:
        raise _exists(db_path) from None


def copy_finished(blank: bytes, run_dir: Path, rank: int) -> Path:
    """Rank ``rank``'s database made from ``blank``: the bytes of another rank's database of the
    same run as :class:`RunWriter` created and finished it, with no record yet (a staged
    import's ranks). The same schema, version and journal mode without building them again; its
    own start and finish times; taken under the rank's lock and linked into place whole, as
    :class:`RunWriter` does. Returns its path."""
    db_path = Path(run_dir) / rank_db_name(rank)
    if db_path.exists():
        raise _exists(db_path)
    lock = liveness.WriterLock(Path(run_dir), rank)
    tmp = db_path.with_name(f".{db_path.name}.{os.getpid()}.init")
    try:
        tmp.write_bytes(blank)
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            # the journal in memory for this one update: the file keeps the blank's mode
            con.execute("PRAGMA journal_mode=MEMORY")
            con.execute("PRAGMA synchronous=OFF")  # a staged import's: deleted if it fails
            con.execute("BEGIN")
            for key, value in (("started", repr(time.time())), ("pid", str(os.getpid()))):
                con.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
            con.execute("UPDATE meta SET value = ? WHERE key = 'finished'", (repr(time.time()),))
            con.execute("COMMIT")
        finally:
            con.close()
        _link_whole(tmp, db_path)
    except (sqlite3.Error, OSError) as e:
        raise MlaprofError(f"cannot create {db_path}: {disk_message(e, db_path.parent)}") from None
    finally:
        tmp.unlink(missing_ok=True)
        lock.release()
    return db_path


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
    run_dir = runmeta.make_run_dir(Path(traces_dir), name, join=True)
    return RunWriter(run_dir, rank, role, meta)

"""All-or-nothing imports: a run is built in a hidden staging folder and renamed into place.

The run's name is reserved when the import starts (its folder created exclusively, so two imports
never take one name, and a symlink in the traces folder is never written through); the staged run
replaces that empty folder when it is complete. An import that fails (bad input, a bug, Ctrl-C)
removes its staging folder and its reservation; one killed outright (SIGKILL) leaves them, and the
next import removes every staging folder whose lock no live process holds. ``list_runs`` ignores
staging folders (hidden) and reserved empty folders (no run.json).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mlaprof.errors import MlaprofError
from mlaprof.store import columnar, create_run, runmeta, trace_checks, validate
from mlaprof.store.bulk import insert_columns, insert_flat
from mlaprof.store.liveness import lock_held
from mlaprof.store.schema import TABLES
from mlaprof.store.writer import RunWriter, copy_finished

if TYPE_CHECKING:
    from mlaprof.store.spill import Spill, SpillChain

STAGING_PREFIX = ".mlaprof-import-"
STAGE_LOCK = "import.lock"  # held (flock) for the whole import: a dead lock is a dead import
RESERVED = "reserved-name"  # the run name the stage reserved
STAGE_GRACE_S = 60.0  # a stage without its lock yet is left alone this long (it is starting)


def _lock_stage(stage: Path) -> int:
    fd = os.open(stage / STAGE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _stage_alive(stage: Path) -> bool:
    held = lock_held(stage / STAGE_LOCK)
    if held is not None:
        return held
    try:  # no lock yet: a stage being created, or one from before stage locks
        return time.time() - stage.stat().st_mtime < STAGE_GRACE_S
    except OSError:
        return False


def clean_dead_stages(traces: Path) -> list[str]:
    """Remove the staging folders of imports killed outright, and the empty folders they
    reserved; returns the names of the stages removed."""
    removed = []
    try:
        stages = [p for p in Path(traces).iterdir() if p.name.startswith(STAGING_PREFIX)]
    except OSError:
        return removed
    for stage in stages:
        if not stage.is_dir() or stage.is_symlink() or _stage_alive(stage):
            continue
        name = ""
        with suppress(OSError, UnicodeDecodeError):
            name = (stage / RESERVED).read_text().strip()
        shutil.rmtree(stage, ignore_errors=True)
        if name and "/" not in name and not name.startswith("."):
            with suppress(OSError):  # only ever an EMPTY folder: never a run
                (Path(traces) / name).rmdir()
        removed.append(stage.name)
    return removed


class BulkWriter:
    """Fast appends straight into a staged rank database (the import owns it exclusively).

    Rows are tuples in the order of ``cols``; ``rank`` is written as a constant; the inserts are
    :mod:`mlaprof.store.bulk`'s multi-row statements. Kernels go to an Arrow side file instead.
    """

    def __init__(self, db_path: Path, rank: int = 0) -> None:
        self.rank = int(rank)
        self.con = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
        # a staged import is deleted on failure, so durability inside it buys nothing
        self.con.execute("PRAGMA journal_mode=OFF")
        self.con.execute("PRAGMA synchronous=OFF")
        self.con.execute("BEGIN")
        self.counts: dict[str, int] = {}
        self.run_dir: Path = Path(db_path).parent
        self._columnar: dict[str, list[Any]] = {}  # table -> Arrow parts, written on commit
        self._flushed: set[str] = set()  # tables whose side file is written (no more rows)
        self._pool: ThreadPoolExecutor | None = None  # background side-file writes
        self._writes: list[Future[columnar.SideTable]] = []
        self._ranks: dict[int, BulkWriter] = {}  # other ranks of the same staged run
        self._blank: bytes | None = None  # a new rank's database as its writer left it
        self.source = ""  # the input file being read, named in value errors
        self.host: str | None = None  # the host the rank ran on, where the trace names it

    def rank_writer(self, rank: int) -> BulkWriter:
        """The bulk writer of another rank of the same staged run (its database is created by the
        store's :class:`RunWriter`); it commits and aborts with this one."""
        rank = int(rank)
        if rank == self.rank:
            return self
        if rank not in self._ranks:
            if self._blank is None:
                writer = RunWriter(self.run_dir, rank)
                writer.finish("finished")  # fold its WAL: the bulk connection owns a plain file
                db_path = writer.db_path
                if not db_path.with_name(db_path.name + "-wal").exists():  # folded: one file
                    self._blank = db_path.read_bytes()  # the next ranks' start: no record yet
            else:  # the same empty database, not built again (its schema a few ms a rank)
                db_path = copy_finished(self._blank, self.run_dir, rank)
            other = BulkWriter(db_path, rank)
            other.run_dir = self.run_dir
            other.source = self.source
            self._ranks[rank] = other
        return self._ranks[rank]

    def reading(self, path: object) -> BulkWriter:
        """Name the file the next rows come from (for error messages); returns self."""
        self.source = str(path)
        return self

    def insert_flat(self, table: str, cols: Sequence[str], flat: list[Any]) -> int:
        """Insert rows given as one flat row-major list (len = rows * len(cols))."""
        validate.rows(table, cols, flat, self.source)
        n = insert_flat(self.con, table, self.rank, cols, flat)
        self.counts[table] = self.counts.get(table, 0) + n
        return n

    def insert_columns(
        self,
        table: str,
        columns: Mapping[str, tuple[np.ndarray, np.ndarray | None]],
        n: int,
        text: Mapping[str, str] | None = None,
    ) -> int:
        """Insert ``n`` rows given as column arrays (see :func:`mlaprof.store.bulk.insert_columns`)."""
        insert_columns(self.con, table, self.rank, columns, n, text)
        self.counts[table] = self.counts.get(table, 0) + n
        return n

    def write_columnar(
        self,
        table: str,
        n: int,
        numbers: Mapping[str, tuple[np.ndarray, np.ndarray | None]],
        text: Mapping[str, tuple[Sequence[Any], np.ndarray]] | None = None,
        spill: tuple[Spill | SpillChain, list[str]] | None = None,
    ) -> int:
        """Queue ``n`` rows for the rank's Arrow side file of ``table``; every call's rows are
        written, in call order, as one file when the import commits. ``spill``: columns of the
        rows parked on disk (read back a batch at a time when the file is written)."""
        if n == 0:
            return 0
        if table in self._flushed:
            raise MlaprofError(f"internal: {table} rows of rank {self.rank} were already written")
        part: Any
        if spill is not None:  # built a batch at a time when written
            part = columnar.Pending(table, self.rank, n, numbers, text, *spill)
        else:
            part = columnar.build(table, self.rank, n, numbers, text)
        self._columnar.setdefault(table, []).append(part)
        self.counts[table] = self.counts.get(table, 0) + n
        return n

    def insert(self, table: str, cols: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        flat: list[Any] = []
        for row in rows:
            flat.extend(row)
        return self.insert_flat(table, cols, flat)

    def insert_dicts(self, table: str, rows: Iterable[Mapping[str, Any]]) -> int:
        rows = list(rows)
        if not rows:
            return 0
        cols = [c for c, _ in TABLES[table]]
        return self.insert(table, cols, ([r.get(c) for c in cols] for r in rows))

    def write_trace_checks(self, checks: Mapping[str, Any]) -> None:
        """Store this rank's trace checks (:mod:`mlaprof.store.trace_checks`): the checks named
        replace the rank's rows of them."""
        trace_checks.write(self.con, self.rank, checks)

    def trace_checks(self) -> trace_checks.TraceChecks:
        """This rank's trace checks stored so far (an import adding to a count)."""
        return trace_checks.read_rank(self.con, self.rank)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.con.execute(sql, params)

    def flush_columnar(self, wait: bool = True) -> None:
        """Write the queued side-file rows now (a rank whose rows are complete), freeing them;
        no more rows of those tables may follow. ``wait=False``: written by a background thread
        (pyarrow releases the GIL) while the caller goes on; :meth:`commit` waits for it."""
        for table, parts in self._columnar.items():
            if wait:
                side = columnar.write(self.run_dir, self.rank, table, parts, self.host)
                columnar.record(self.con, side, self.run_dir)
            else:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1)
                job = self._pool.submit(
                    columnar.write, self.run_dir, self.rank, table, parts, self.host
                )
                self._writes.append(job)
            self._flushed.add(table)
        self._columnar.clear()

    def _join_writes(self) -> None:
        """Wait for the background writes and name their files (an error raises here)."""
        try:
            for job in self._writes:
                columnar.record(self.con, job.result(), self.run_dir)
        finally:
            self._writes.clear()
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def commit(self) -> None:
        for other in self._ranks.values():
            other.commit()
        self.flush_columnar()
        self._join_writes()
        if self.con.in_transaction:
            self.con.execute("COMMIT")
        self.con.close()

    def abort(self) -> None:
        for other in self._ranks.values():
            other.abort()
        with suppress(Exception):  # the import failed already; its files go with the stage
            self._join_writes()
        with suppress(sqlite3.Error):
            self.con.execute("ROLLBACK")
        self.con.close()


@contextmanager
def staged_run(
    traces_dir: Path | str, name: str, meta: Mapping[str, Any], unique: bool = False
) -> Iterator[tuple[BulkWriter, Path]]:
    """Yield a bulk writer on a fresh run; on success the run appears at ``traces_dir/name``
    (``unique``: a default name, given a ``-2``, ``-3``... suffix when taken).

    Yields ``(bulk, final_path)``. Any exception (SIGTERM included, which the CLI raises as
    :class:`~mlaprof.errors.Terminated`) removes everything written.
    """
    traces = Path(traces_dir)
    clean_dead_stages(traces)
    # the name is reserved now, atomically: an exclusive mkdir (never through a symlink)
    if unique:
        final = traces / runmeta.reserve(traces, runmeta.default_name(name))
    else:
        final = runmeta.make_run_dir(traces, name)
    try:
        stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=traces))
        lock_fd = _lock_stage(stage)
        (stage / RESERVED).write_text(final.name)
    except OSError as e:
        with suppress(OSError):
            final.rmdir()
        raise MlaprofError(f"cannot create a run under {traces}: {e.strerror or e}") from None
    bulk: BulkWriter | None = None
    done = False
    try:
        writer: RunWriter = create_run(stage, final.name, {**dict(meta), "status": "importing"})
        staged_dir = writer.run_dir
        # fold the writer's WAL so that the bulk connection owns a plain database file
        writer.finish("finished")
        bulk = BulkWriter(writer.db_path, writer.rank)
        bulk.run_dir = staged_dir
        yield bulk, final
        ranks = sorted({bulk.rank, *bulk._ranks})
        bulk.commit()
        bulk = None
        # the ranks written, so that a rank database deleted later is named, not unnoticed
        runmeta.update(staged_dir, ranks=ranks)
        try:
            os.rename(staged_dir, final)  # replaces the reserved (empty) folder
        except OSError as e:
            raise MlaprofError(f"cannot create run {final}: {e.strerror or e}") from None
        done = True
    except BaseException:
        if bulk is not None:
            bulk.abort()
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        os.close(lock_fd)
        if not done:
            with suppress(OSError):
                final.rmdir()  # the reservation (empty unless the rename happened)

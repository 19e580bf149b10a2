"""rocpd SQLite importer: rocprofv3's default output (``<prefix>_results.db``, one per process and
host) and mlaprof's own rocpd exports.

Reads the unsuffixed ``rocpd_*`` views (they exist in every rocpd database, over one or several
uuid-suffixed table sets) with its own joins, the way rocpd's data views read them
(rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/data_views.sql``): a dispatch's launch
correlation is its event's ``stack_id`` (``correlation_id`` holds the *external* id, 0 without
kernel rename: ``source/lib/output/generateRocpd.cpp``); API calls are ``rocpd_region`` rows; a
roctx range or mark carries its message in the event's ``extdata`` ``{"message": ...}``; marks
(start == end) are ``rocpd_sample`` rows. Tables a writer may leave out (memory copies and
allocations, streams, threads, samples) are read where present and named once where not.
mlaprof's extra fields, when the database is an mlaprof export, come back from ``extdata``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import quote

import numpy as np

from mlaprof.errors import MlaprofError, signal_received, stop_exception
from mlaprof.formats import arrow_numpy
from mlaprof.formats.rocpd_schema import LAYER_CATEGORY, PAYLOAD_ARG, PAYLOAD_TABLES
from mlaprof.importers.annotate import NULL as NULL_INT
from mlaprof.importers.annotate import KernelColumns, write_kernels
from mlaprof.importers.common import GpuAgent, gpu_agent
from mlaprof.importers.duplicates import check_records
from mlaprof.importers.inputs import is_sqlite
from mlaprof.importers.rocprof_csv import _KERNEL_SRC, _TRANSFER_COLS, KERNEL_COLS
from mlaprof.live_inputs import changing, stamp
from mlaprof.rank_counts import counted
from mlaprof.store.schema import TABLES

if TYPE_CHECKING:
    from mlaprof.importers.common import ImportSummary
    from mlaprof.store.staging import BulkWriter

P = ParamSpec("P")
R = TypeVar("R")


# a rocpd database is the user's input: its views may hold any SQL (a recursive query that never
# ends). Reading one gives up after this many seconds (MLAPROF_ROCPD_TIMEOUT overrides it).
DEFAULT_TIMEOUT_S = 60.0


def _timeout() -> float:
    raw = os.environ.get("MLAPROF_ROCPD_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        raise MlaprofError(f"MLAPROF_ROCPD_TIMEOUT={raw!r} is not a number of seconds") from None


class _Bound:
    """An SQLite progress handler: interrupts a query past the deadline, and lets a signal
    (Ctrl-C, SIGTERM) that arrives inside a long query stop it instead of waiting for it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.expired = False

    def stopped_by(self) -> int | None:
        """The stop signal that arrived during the command (its handler's exception was
        swallowed inside SQLite's callback, or raised in the main thread while this read ran in
        a worker), if any."""
        return signal_received()

    def gave_up(self, path: Path) -> MlaprofError:
        return MlaprofError(
            f"{path}: gave up after {self.seconds:g} s reading the database (a view or query "
            "that does not end: crafted or damaged?); set MLAPROF_ROCPD_TIMEOUT to allow longer"
        )

    def __call__(self) -> int:
        if self.stopped_by() is not None:
            return 1
        if time.monotonic() > self.deadline:
            self.expired = True
            return 1
        return 0


SCHEMA_MAJOR = "3"  # ROCm 7.0 writes "3", later releases "3.0.0" .. "3.0.5"
# tables a rocpd database may lack: read where present, said once where not
OPTIONAL = ("region", "event", "sample", "track", "memory_copy", "memory_allocate",
            "info_stream", "info_thread", "info_process", "info_agent", "info_kernel_symbol")  # fmt: skip
MARKER_OPS = ("roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxRangePushA",
              "roctxRangeStartA")  # fmt: skip


# One import reads a database several times (the dispatches ahead in a thread, then the other
# tables): inside :func:`pinned`, every read of a path gets the same state of it.
_pins: dict[Path, tuple[str, tuple[Any, ...] | None]] | None = None
_pin_lock = threading.Lock()
# a copy of a database and its -wal that changed while it was made is made again this often
_COPY_TRIES = 3


@contextlib.contextmanager
def pinned() -> Iterator[None]:
    """Every :func:`readable` of a path inside this block reads the same snapshot of it (taken
    at its first read, dropped at the end): an import's reads agree with each other."""
    global _pins
    with _pin_lock:
        outer = _pins is None
        if outer:
            _pins = {}
    try:
        yield
    finally:
        if outer:
            with _pin_lock:
                dirs = list(_pin_dirs)
                _pin_dirs.clear()
                _pins = None
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)


_pin_dirs: list[str] = []  # the pinned snapshots' private folders


def pinning(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` run inside :func:`pinned` (an importer: all its reads of a database agree)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with pinned():
            return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def readable(path: Path) -> Iterator[str]:
    """An SQLite URI that reads ``path`` as one consistent state, without writing beside it.

    A database a writer may still be appending to is never read as files copied one after the
    other (a database and its ``-wal`` copied apart hold a state no commit ever had): a
    WAL-mode database whose ``-shm`` is there (its writer's shared index: a connection has it
    open) is snapshot by SQLite's backup API, in one step, inside one read transaction: a
    committed state. A WAL database with neither ``-wal`` nor ``-shm`` has no connection: it is
    opened ``immutable`` (nothing created beside the user's file, which a read-only folder
    refuses). A ``-wal`` left without ``-shm`` (its writer gone) is copied with the database,
    checked unchanged across the copy. A file read in place whose size or modification time
    moved while it was read is refused as changing, never as malformed."""
    key = Path(path).absolute()
    with _pin_lock:
        got = _pins.get(key) if _pins is not None else None
    if got is None:
        tmp = tempfile.mkdtemp(prefix="mlaprof-rocpd-")
        try:
            got = _open_state(Path(path), tmp)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with _pin_lock:
            if _pins is not None:
                if key in _pins:  # another thread pinned it meanwhile: one state for all
                    shutil.rmtree(tmp, ignore_errors=True)
                    got = _pins[key]
                else:
                    _pins[key] = got
                    _pin_dirs.append(tmp)
                tmp = ""
    else:
        tmp = ""
    uri, stamp = got
    try:
        try:
            yield uri
        except (sqlite3.DatabaseError, MlaprofError):
            if stamp is not None and _stamp(Path(path)) != stamp:
                raise _changing(Path(path)) from None
            raise
        if stamp is not None and _stamp(Path(path)) != stamp:
            raise _changing(Path(path))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _changing(path: Path) -> MlaprofError:
    return changing(path)


def _stamp(path: Path) -> tuple[Any, ...]:
    """Size and modification time of the database and its -wal (None where absent)."""
    return tuple(stamp(p) for p in (path, path.with_name(path.name + "-wal")))


def _open_state(path: Path, tmp: str) -> tuple[str, tuple[Any, ...] | None]:
    """``(uri, stamp)``: where to read ``path`` from, and the stamp a read in place must still
    have when it ends (None: a private snapshot, which nothing else changes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        head = b""
    stamp = _stamp(path)
    if len(head) < 20 or head[18] != 2:  # rollback journal: read in place, checked unchanged
        return f"file:{quote(str(path))}?mode=ro", stamp
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    if shm.exists():  # a connection (a writer still appending?) has it open
        return _backup(path, Path(tmp) / "snapshot.db"), None
    if not wal.exists():
        return f"file:{quote(str(path))}?mode=ro&immutable=1", stamp
    copy = Path(tmp) / "copy.db"
    for _ in range(_COPY_TRIES):
        before = _stamp(path)
        try:
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, Path(tmp) / "copy.db-wal")
        except OSError as e:
            raise MlaprofError(f"cannot read {path} (WAL mode, copied to read): {e}") from None
        if _stamp(path) == before:
            return f"file:{quote(str(copy))}?mode=ro", None
    raise _changing(path)


def _backup(path: Path, dest: Path) -> str:
    """A private copy of ``path``'s last committed state through SQLite's backup API (all
    pages in one step: one read transaction, so one commit's state however fast the writer
    appends)."""
    try:
        src = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=10)
        try:
            dst = sqlite3.connect(dest)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except sqlite3.Error as e:
        raise MlaprofError(
            f"cannot take a consistent snapshot of {path} (WAL mode, open by a writer): {e}"
        ) from None
    return f"file:{quote(str(dest))}?mode=ro"


def _bounded(uri: str) -> tuple[sqlite3.Connection, _Bound]:
    """A read connection whose queries are bounded (:class:`_Bound`); raises sqlite3.Error."""
    con = sqlite3.connect(uri, uri=True)
    bound = _Bound(_timeout())
    con.set_progress_handler(bound, 10_000)
    return con, bound


def _peek(path: Path, sql: str) -> tuple[Any, ...] | None:
    """The first row of one query on a user's database, bounded like every read of it
    (:class:`_Bound`: the time limit, Ctrl-C and SIGTERM); None when the file is not a readable
    rocpd database (the import itself reports that)."""
    return _asking(path, lambda con: con.execute(sql).fetchone())


def _asking(path: Path, ask: Callable[[sqlite3.Connection], Any]) -> Any:
    """``ask(connection)`` on a user's database, bounded as :func:`_peek` is; None when the
    file is not a readable rocpd database."""
    with readable(path) as uri:
        try:
            con, bound = _bounded(uri)
        except sqlite3.Error:
            return None
        try:
            return ask(con)
        except sqlite3.Error:
            if (signum := bound.stopped_by()) is not None:
                raise stop_exception(signum) from None
            if bound.expired:
                raise bound.gave_up(path) from None
            return None
        finally:
            con.close()


def table_names(path: Path) -> set[str]:
    """The tables of an SQLite file, read as every user database is (bounded, never written);
    empty where it is not readable."""
    got = _asking(
        path,
        lambda con: [
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ],
    )
    return set(got or [])


_FIRST_OF_GUID = (
    "SELECT A.absolute_index FROM rocpd_kernel_dispatch K JOIN rocpd_info_agent A "
    "ON A.id = K.agent_id AND A.guid = K.guid WHERE K.guid = ? ORDER BY K.id LIMIT 1"
)


def first_agent(path: Path) -> int | None:
    """The GPU (agent absolute index) of the database's first kernel dispatch (by guid, then
    id), or None (also for a file that is not a readable rocpd database: the import itself
    reports that). Asked guid by guid, in order, of the agents table (a dispatch joins its
    agent's guid): the first dispatch of a guid is found in id order without sorting the whole
    table, which took ~35 ms per 250k dispatches and ran before any rank's read started."""

    def ask(con: sqlite3.Connection) -> tuple[Any, ...] | None:
        guids = con.execute("SELECT DISTINCT guid FROM rocpd_info_agent ORDER BY guid")
        for (guid,) in guids.fetchall():
            row = con.execute(_FIRST_OF_GUID, (guid,)).fetchone()
            if row is not None:
                return row
        return None

    row = _asking(path, ask)
    return None if row is None or not isinstance(row[0], int) else row[0]


def gpu_agents(path: Path) -> list[GpuAgent]:
    """The GPU agents of a database rocprofv3 wrote (``rocpd_info_agent``: name, model_name,
    product_name; rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql``), by
    the absolute index its dispatches are read with. None for mlaprof's own export, whose agent
    rows carry its ids as names (its device comes back with the run's metadata)."""
    if export_identity(path) is not None:
        return []

    def ask(con: sqlite3.Connection) -> list[tuple[Any, ...]]:
        have = {r[1] for r in con.execute("PRAGMA table_info(rocpd_info_agent)").fetchall()}
        cols = [c if c in have else "NULL" for c in ("product_name", "model_name")]
        return con.execute(
            f"SELECT absolute_index, name, {cols[0]}, {cols[1]} FROM rocpd_info_agent "
            "WHERE type = 'GPU'"
        ).fetchall()

    rows = _asking(path, ask) or []
    return [gpu_agent([i if isinstance(i, int) else None], n, p, m) for i, n, p, m in rows]


def export_identity(path: Path) -> tuple[str, str, str] | None:
    """(run name, created, rank) of the mlaprof run a rocpd database was exported from (rank
    "None" for an export of a run of one rank), or None for a database rocprofv3 wrote: two
    exports of one run's rank are one rank, never two; a run of several ranks exports one
    database per rank, each its own."""
    row = _peek(
        path,
        "SELECT json_extract(extdata, '$.mlaprof.meta.name'), "
        "json_extract(extdata, '$.mlaprof.meta.created'), json_extract(extdata, '$.mlaprof.rank') "
        "FROM rocpd_info_process "
        "WHERE json_valid(extdata) AND json_extract(extdata, '$.mlaprof.meta.name') IS NOT NULL "
        "ORDER BY guid, id LIMIT 1",
    )
    if row is None or not isinstance(row[0], str):
        return None
    return row[0], str(row[1]), str(row[2])


def _json(text: Any) -> dict[str, Any]:
    if not text:
        return {}
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def _cols(con: sqlite3.Connection, view: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{view}")')}


def import_rocpd(
    path: Path, bulk: BulkWriter, summary: ImportSummary, kernels: KernelColumns | None = None
) -> tuple[dict[str, Any], KernelColumns | None]:
    """Import a rocpd database. Returns the embedded mlaprof run metadata ({} if none) and the
    kernels that still need annotation (those without mlaprof's own fields). ``kernels``: the
    database's dispatches already read by :func:`read_dispatches` (not read again)."""
    if not is_sqlite(path):
        raise MlaprofError(f"{path} is not an SQLite database")
    with readable(path) as uri:
        try:
            con, bound = _bounded(uri)
        except sqlite3.Error as e:
            raise MlaprofError(f"cannot open {path}: {e}") from None
        try:
            found, kc = _import(con, path, bulk, summary, kernels)
            # repeated dispatch records and dispatches without their symbol: said, not data
            return found, (None if kc is None else check_records(kc, path, bulk, summary.notes))
        except sqlite3.Error as e:
            if (signum := bound.stopped_by()) is not None:
                raise stop_exception(signum) from None
            if bound.expired:
                raise bound.gave_up(path) from None
            raise MlaprofError(f"{path} is not a readable rocpd database ({e})") from None
        finally:
            con.close()


def allocation_kind(type_: Any, level: Any) -> tuple[str, str | None]:
    """(kind, operation) of a ``rocpd_memory_allocate`` row, as rocprofv3's CSV and JSON name
    them: generateRocpd.cpp ``memtype_to_db`` strips ``MEMORY_ALLOCATION_`` (and ``VMEM_``, level
    VIRTUAL) or ``SCRATCH_MEMORY_`` (level SCRATCH) off the operation and writes ALLOCATE as
    ALLOC; this puts them back, so an allocation reads alike from every format (a scratch row
    is scratch memory, not an allocation)."""
    t = None if type_ is None else str(type_)
    lv = None if level is None else str(level).upper()
    if lv == "SCRATCH":
        return "SCRATCH_MEMORY", None if t is None else f"SCRATCH_MEMORY_{t}"
    if t is None:
        return "MEMORY_ALLOCATION", None
    t = "ALLOCATE" if t == "ALLOC" else t
    return "MEMORY_ALLOCATION", f"MEMORY_ALLOCATION_{'VMEM_' if lv == 'VIRTUAL' else ''}{t}"


def _has(objs: set[str], *names: str) -> bool:
    return all(f"rocpd_{n}" in objs for n in names)


def _join(objs: set[str], table: str, alias: str, on: str) -> str:
    """A LEFT JOIN of an optional table (nothing where the database lacks it)."""
    return f"LEFT JOIN rocpd_{table} {alias} ON {on} " if _has(objs, table) else ""


def _col(objs: set[str], table: str, expr: str, fallback: str = "NULL") -> str:
    return expr if _has(objs, table) else fallback


def _import(
    con: sqlite3.Connection,
    path: Path,
    bulk: BulkWriter,
    summary: ImportSummary,
    fast: KernelColumns | None,
) -> tuple[dict[str, Any], KernelColumns | None]:
    objs = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    needed = {"rocpd_metadata", "rocpd_kernel_dispatch", "rocpd_string"}
    if not needed <= objs:
        missing = ", ".join(sorted(needed - objs))
        raise MlaprofError(f"{path} is not a rocpd database (missing {missing})")
    tags = dict(con.execute("SELECT tag, value FROM rocpd_metadata").fetchall())
    version = str(tags.get("schema_version", ""))
    if version != SCHEMA_MAJOR and not version.startswith(SCHEMA_MAJOR + "."):
        raise MlaprofError(
            f"{path}: unsupported rocpd schema version {tags.get('schema_version')!r} (need 3.x)"
        )
    absent = [f"rocpd_{n}" for n in OPTIONAL if not _has(objs, n)]
    if absent:
        summary.notes.append(
            f"{path.name}: no {', '.join(absent)} (optional rocpd tables): what they would "
            "hold is not read"
        )
    kernels = fast if fast is not None else _kernel_rows(con, path, bulk, summary, objs)
    kfd: list[int] = [0]
    api = _api_rows(con, objs, kfd)
    summary.add("api", bulk.insert("api", _API_COLS, api))

    xfer: list[list[Any]] = []
    ev = _join(objs, "event", "E", "E.id = M.event_id AND E.guid = M.guid")
    corr = _col(objs, "event", "E.stack_id")
    if _has(objs, "memory_copy"):
        agent = _has(objs, "info_agent")
        for r in con.execute(
            f"SELECT S.string, {'SA.name, DA.name' if agent else 'NULL, NULL'}, M.size, {corr}, "
            "M.start, M.end, M.extdata FROM rocpd_memory_copy M "
            "LEFT JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid "
            + _join(objs, "info_agent", "SA", "SA.id = M.src_agent_id AND SA.guid = M.guid")
            + _join(objs, "info_agent", "DA", "DA.id = M.dst_agent_id AND DA.guid = M.guid")
            + ev
            + "ORDER BY M.guid, M.id"
        ):
            mine = _json(r[7]).get("mlaprof_transfer")
            xfer.append(
                [mine.get(c) for c in _TRANSFER_COLS]
                if isinstance(mine, dict)
                else ["MEMORY_COPY", r[0], r[1], r[2], r[3], None, r[4], r[5], r[6]]
            )
    if _has(objs, "memory_allocate"):
        agent = _col(objs, "info_agent", "A.name")
        have = {c[1] for c in con.execute("PRAGMA table_info(rocpd_memory_allocate)")}
        level = "M.level" if "level" in have else "NULL"
        for r in con.execute(
            f"SELECT M.type, {agent}, M.size, M.address, {corr}, M.start, M.end, M.extdata, "
            f"{level} FROM rocpd_memory_allocate M "
            + _join(objs, "info_agent", "A", "A.id = M.agent_id AND A.guid = M.guid")
            + ev
            + "ORDER BY M.guid, M.id"
        ):
            mine = _json(r[7]).get("mlaprof_transfer")
            addr = None if r[3] is None else hex(r[3])
            xfer.append(
                [mine.get(c) for c in _TRANSFER_COLS]
                if isinstance(mine, dict)
                else [*allocation_kind(r[0], r[8]), None, r[1], r[2], addr, r[4], r[5], r[6]]
            )
    summary.add("transfers", bulk.insert("transfers", _TRANSFER_COLS, xfer))

    kfd_values = 0
    if _has(objs, "pmc_event", "info_pmc"):
        sym = _has(objs, "info_kernel_symbol")
        # a KFD event's value (its info_pmc row's block "KFD") is a driver event's, no counter
        # sampled on a kernel: left out, counted in the KFD note
        block = "I.block" if "block" in _cols(con, "rocpd_info_pmc") else "NULL"
        # one row per counter instance (generateRocpd.cpp insert_pmc_event_data writes each of a
        # dispatch's values with its counter's id): summed per dispatch and counter, as the
        # CSV writes them (generateCSV.cpp, the counter collection's generate_csv), so a run's
        # counters read alike from every format; a row with no event stays its own
        pmc = con.execute(
            f"SELECT I.name, {'S.display_name' if sym else 'NULL'}, SUM(PE.value), K.start, "
            f"{block} = '{KFD_BLOCK}' "
            "FROM rocpd_pmc_event PE "
            "JOIN rocpd_info_pmc I ON I.id = PE.pmc_id AND I.guid = PE.guid "
            "LEFT JOIN rocpd_kernel_dispatch K ON K.event_id = PE.event_id AND K.guid = PE.guid "
            + _join(objs, "info_kernel_symbol", "S", "S.id = K.kernel_id AND S.guid = K.guid")
            + "GROUP BY PE.guid, COALESCE(PE.event_id, -1 - PE.id), PE.pmc_id "
            "ORDER BY PE.guid, MIN(PE.id)"
        ).fetchall()
        kfd_values = sum(1 for r in pmc if r[4])
        n = bulk.insert(
            "counters",
            ("source", "name", "key", "value", "t_ns"),
            (["rocpd-pmc", *r[:4]] for r in pmc if not r[4]),
        )
        summary.add("counters", n)
    if kfd[0] or kfd_values:
        summary.notes.append(
            f"{counted(kfd[0], 'KFD event region(s)')} (rocprofv3 --kfd-trace: page faults, "
            "migrations, queue evictions) not read as API calls, their "
            f"{counted(kfd_values, 'value(s)')} not as counters"
        )

    # an mlaprof export carries its analysis tables in the process row
    meta: dict[str, Any] = {}
    procs = (
        con.execute("SELECT extdata FROM rocpd_info_process ORDER BY guid, id")
        if _has(objs, "info_process")
        else []
    )
    for (ext,) in procs:
        mine = _json(ext).get("mlaprof")
        if not isinstance(mine, dict):
            continue
        meta = mine.get("meta") or {}
        tables = mine.get("tables") or {}  # exports before the payload had its own table
        for name in PAYLOAD_TABLES:
            recs = tables.get(name) or []
            if recs:
                _restore(bulk, summary, path, name, recs)
        if mine.get("tables_in") == PAYLOAD_ARG and _has(objs, "arg"):
            _restore_payload(con, bulk, summary, path)
    summary.files.append(str(path))
    return meta, kernels


def _restore(
    bulk: BulkWriter, summary: ImportSummary, path: Path, name: str, recs: list[Any]
) -> None:
    """Rows of an analysis table carried by an mlaprof export, stored."""
    cols = [c for c, _ in TABLES[name]]
    if not all(isinstance(x, dict) for x in recs):
        raise MlaprofError(f"{path}: corrupt mlaprof payload in table {name}")
    summary.add(name, bulk.insert(name, cols, ([x.get(c) for c in cols] for x in recs)))


def _restore_payload(
    con: sqlite3.Connection, bulk: BulkWriter, summary: ImportSummary, path: Path
) -> None:
    """The analysis tables of an mlaprof export, one JSON row each in a ``rocpd_arg`` row, read
    from a cursor and stored a batch at a time (a 10M-kernel import's layers)."""
    batch: list[Any] = []
    current: str | None = None
    rows = con.execute(
        "SELECT name, value FROM rocpd_arg WHERE type = ? ORDER BY guid, event_id, position",
        (PAYLOAD_ARG,),
    )
    for name, text in rows:
        if name != current or len(batch) >= PAYLOAD_BATCH:
            if batch and current is not None:
                _restore(bulk, summary, path, current, batch)
            batch, current = [], name
        if name not in PAYLOAD_TABLES:
            raise MlaprofError(f"{path}: the mlaprof payload names an unknown table {name!r}")
        try:
            batch.append(json.loads(text))
        except (TypeError, ValueError):
            raise MlaprofError(f"{path}: corrupt mlaprof payload in table {name}") from None
    if batch and current is not None:
        _restore(bulk, summary, path, current, batch)


PAYLOAD_BATCH = 50_000
_API_COLS = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")


def _message(domain: Any, name: Any, extdata: Any) -> Any:
    """A roctx range's or mark's message (its event's extdata), else the operation's name."""
    if (isinstance(domain, str) and "MARKER" in domain.upper()) or name in MARKER_OPS:
        msg = _json(extdata).get("message")
        if isinstance(msg, str):
            return msg
    return name


_CATEGORY = "(SELECT string FROM rocpd_string C WHERE C.id = E.category_id AND C.guid = E.guid)"


def _api_rows(con: sqlite3.Connection, objs: set[str], kfd: list[int]) -> list[list[Any]]:
    """Host API calls (regions) and roctx ranges and marks (regions and samples), correlated by
    their event's ``stack_id`` (the internal correlation id, as the ``regions`` view reads it).
    Without a HIP API trace, schema 3.0.2's ``rocpd_graph_launch`` rows stand for the
    ``hipGraphLaunch`` calls (their event carries the launch's correlation id). ``kfd[0]``
    counts the KFD event regions left out (:data:`KFD_PREFIX`)."""
    out = _region_rows(con, objs, kfd) + _sample_rows(con, objs)
    if not any("GraphLaunch" in str(r[1]) for r in out):
        out += _graph_launch_rows(con, objs)
    return out


# KFD events (rocprofv3 --kfd-trace, part of --runtime-trace / --sys-trace in newer SDKs) are
# written as regions whose event category is their buffer-tracing kind, KFD_EVENT_* or KFD_*
# (generateRocpd.cpp ``insert_kfd_event_data``: stack_id 0, a rocpd_pmc_event beside): driver
# events, no host API call. Read as API calls, a trace of them alone would look like an API
# trace with no sync in it, where no API was traced at all.
KFD_PREFIX = "KFD_"
# the block of the info_pmc rows that name a KFD event kind (the same function)
KFD_BLOCK = "KFD"


def _region_rows(con: sqlite3.Connection, objs: set[str], kfd: list[int]) -> list[list[Any]]:
    out: list[list[Any]] = []
    if not _has(objs, "region"):
        return out
    ev = _has(objs, "event")
    cat = _CATEGORY if ev else "NULL"
    cur = con.execute(
        f"SELECT {cat}, S.string, {_col(objs, 'info_process', 'COALESCE(P.pid, R.pid)', 'R.pid')}, "
        f"{_col(objs, 'info_thread', 'COALESCE(T.tid, R.tid)', 'R.tid')}, "
        f"{'E.stack_id' if ev else 'NULL'}, R.start, R.end, R.extdata, "
        f"{'E.extdata' if ev else 'NULL'} FROM rocpd_region R "
        + _join(objs, "event", "E", "E.id = R.event_id AND E.guid = R.guid")
        + "LEFT JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid "
        + _join(objs, "info_process", "P", "P.id = R.pid AND P.guid = R.guid")
        + _join(objs, "info_thread", "T", "T.id = R.tid AND T.guid = R.guid")
        + "ORDER BY R.guid, R.id"
    )
    for r in cur:
        if r[0] == LAYER_CATEGORY:
            continue  # mlaprof's per-layer ranges: the layers are derived from the kernels
        if isinstance(r[0], str) and r[0].startswith(KFD_PREFIX):
            kfd[0] += 1  # a driver event, no API call
            continue
        mine = _json(r[7]).get("mlaprof_api")
        if isinstance(mine, dict):
            out.append([mine.get(c) for c in _API_COLS])
        else:
            out.append([r[0], _message(r[0], r[1], r[8]), r[2], r[3], r[4], r[5], r[6]])
    return out


def _sample_rows(con: sqlite3.Connection, objs: set[str]) -> list[list[Any]]:
    """roctx marks: samples on a track named after their category, the message in the event."""
    out: list[list[Any]] = []
    if not _has(objs, "sample", "track", "event"):
        return out
    for r in con.execute(
        f"SELECT {_CATEGORY}, (SELECT string FROM rocpd_string N WHERE N.id = TR.name_id AND "
        f"N.guid = TR.guid), {_col(objs, 'info_process', 'COALESCE(P.pid, TR.pid)', 'TR.pid')}, "
        f"{_col(objs, 'info_thread', 'COALESCE(TH.tid, TR.tid)', 'TR.tid')}, E.stack_id, "
        "S.timestamp, E.extdata FROM rocpd_sample S "
        "JOIN rocpd_track TR ON TR.id = S.track_id AND TR.guid = S.guid "
        "JOIN rocpd_event E ON E.id = S.event_id AND E.guid = S.guid "
        + _join(objs, "info_process", "P", "P.id = TR.pid AND P.guid = TR.guid")
        + _join(objs, "info_thread", "TH", "TH.id = TR.tid AND TH.guid = TR.guid")
        + "ORDER BY S.guid, S.id"
    ):
        domain = r[0] or r[1]
        msg = _json(r[6]).get("message")
        if not isinstance(msg, str) and "MARKER" not in str(domain).upper():
            continue  # counter or PC samples: not host calls
        out.append([domain, msg if isinstance(msg, str) else r[1], r[2], r[3], r[4], r[5], r[5]])
    return out


def _graph_launch_rows(con: sqlite3.Connection, objs: set[str]) -> list[list[Any]]:
    """One ``hipGraphLaunch`` row per ``rocpd_graph_launch`` record (schema >= 3.0.2)."""
    if not _has(objs, "graph_launch", "event"):
        return []
    return [
        [r[0] or "HIP_GRAPH", "hipGraphLaunch", *r[1:]]
        for r in con.execute(
            f"SELECT {_CATEGORY}, "
            f"{_col(objs, 'info_process', 'COALESCE(P.pid, G.pid)', 'G.pid')}, "
            f"{_col(objs, 'info_thread', 'COALESCE(T.tid, G.tid)', 'G.tid')}, E.stack_id, "
            "G.start, G.end FROM rocpd_graph_launch G "
            "JOIN rocpd_event E ON E.id = G.event_id AND E.guid = G.guid "
            + _join(objs, "info_process", "P", "P.id = G.pid AND P.guid = G.guid")
            + _join(objs, "info_thread", "T", "T.id = G.tid AND T.guid = G.guid")
            + "ORDER BY G.guid, G.id"
        )
    ]


def _ints(flat: list[Any], path: Path, cols: tuple[str, ...] = KERNEL_COLS) -> list[Any]:
    """Kernel fields but the name must be integers (int64): check, since SQLite columns and the
    mlaprof payload's JSON accept anything."""
    k = len(cols)
    for i, v in enumerate(flat):
        c = cols[i % k]
        if c == "name" or v is None:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or not -(2**63) <= v < 2**63:
            raise MlaprofError(f"{path}: kernel field {c} holds {v!r}, not a 64-bit integer")
    return flat


def _kernel_rows(
    con: sqlite3.Connection, path: Path, bulk: BulkWriter, summary: ImportSummary, objs: set[str]
) -> KernelColumns | None:
    """Dispatches row by row (any rocpd database, mlaprof exports included): an mlaprof export's
    kernels are stored as they are, the others returned for annotation. A dispatch's
    correlation is its event's ``stack_id``: the launching call's internal correlation id."""
    kd = _cols(con, "rocpd_kernel_dispatch")
    graph = (
        "K.graph_exec_id, K.graph_node_id"
        if {"graph_exec_id", "graph_node_id"} <= kd
        else "NULL, NULL"
    )
    stream = _col(objs, "info_stream", "COALESCE(JSON_EXTRACT(ST.extdata, '$.stream'), K.stream_id)",
                  "K.stream_id")  # fmt: skip
    cur = con.execute(
        f"SELECT {_col(objs, 'info_kernel_symbol', 'COALESCE(S.display_name, S.kernel_name)')}, "
        f"K.start, K.end, {_col(objs, 'info_agent', 'A.absolute_index')}, {stream}, "
        f"{_col(objs, 'event', 'E.stack_id')}, "
        "K.grid_size_x, K.grid_size_y, K.grid_size_z, K.workgroup_size_x, K.workgroup_size_y, "
        f"K.workgroup_size_z, {graph}, K.extdata "
        "FROM rocpd_kernel_dispatch K "
        + _join(objs, "info_kernel_symbol", "S", "S.id = K.kernel_id AND S.guid = K.guid")
        + _join(objs, "info_agent", "A", "A.id = K.agent_id AND A.guid = K.guid")
        + _join(objs, "event", "E", "E.id = K.event_id AND E.guid = K.guid")
        + _join(objs, "info_stream", "ST", "ST.id = K.stream_id AND ST.guid = K.guid")
        + "ORDER BY K.guid, K.id"
    )
    extra_cols = ("step", "layer", "replay", "splits")
    kcols = KERNEL_COLS + extra_cols
    flat: list[Any] = []
    foreign: list[Any] = []
    for r in cur:
        mine = _json(r[14]).get("mlaprof")
        if isinstance(mine, dict):
            # an mlaprof export: its own fields are exact, including NULLs
            flat += [mine.get(c) for c in kcols]
        else:
            foreign += r[:14]
    if flat:
        write_kernels(bulk, KernelColumns.from_rows(kcols, _ints(flat, path, kcols)), summary)
    kernels = KernelColumns.from_rows(KERNEL_COLS, _ints(foreign, path)) if foreign else None
    return kernels


# store column -> rocpd_kernel_dispatch column: the CSV's names, but for the timestamps
_DISPATCH_COLS = {
    "start_ns": "start",
    "end_ns": "end",
    **{c: _KERNEL_SRC[c] for c in KERNEL_COLS if c.startswith(("grid_", "block_", "graph_"))},
}


def read_dispatches(path: Path, ways: int = 1) -> KernelColumns | None:
    """The dispatches of a rocprofv3-written database as columns, read by SQLite's ADBC driver
    straight into Arrow (a Python tuple per row cost ~10 us per dispatch); the small tables
    (symbols, agents, streams) are joined in numpy, the event's launch correlation in SQL.
    Returns None where the row-by-row reader must run instead: no ADBC driver, an mlaprof export
    (its kernels carry their own fields), several table sets (guids), or anything unexpected,
    which that reader then reports. Thread-safe (its own connections). ``ways``: id ranges of
    a big table read at once, in threads (SQLite's driver reads without the GIL), so one rank
    read ahead keeps the free cores busy where two ranks read ahead would hold twice the memory."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    with readable(path) as uri:
        return _read_dispatches(path, uri, adbc, ways)


def _read_dispatches(path: Path, uri: str, adbc: Any, ways: int) -> KernelColumns | None:
    # the checks below read the user's views (MIN/MAX scan them): bounded like every rocpd read
    try:
        con, bound = _bounded(uri)
    except sqlite3.Error:
        return None
    try:
        kd = _cols(con, "rocpd_kernel_dispatch")
        # one table set (several guids: the row-by-row reader's ORDER BY guid), and not an
        # mlaprof export (it marks its process row and every dispatch: the first and last are
        # checked, as a scan of every dispatch's extdata would cost a fifth of the read)
        sets = con.execute(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' "
            "AND name LIKE 'rocpd!_kernel!_dispatch!_%' ESCAPE '!'"
        ).fetchone()[0]
        mine = "extdata LIKE '%\"mlaprof%'"
        if not kd or sets != 1:
            return None
        first, last, marked = con.execute(
            "SELECT (SELECT MIN(id) FROM rocpd_kernel_dispatch), "
            "(SELECT MAX(id) FROM rocpd_kernel_dispatch), "
            f"EXISTS (SELECT 1 FROM rocpd_info_process WHERE {mine}) OR EXISTS "
            "(SELECT 1 FROM rocpd_kernel_dispatch WHERE id IN ((SELECT MIN(id) FROM "
            "rocpd_kernel_dispatch), (SELECT MAX(id) FROM rocpd_kernel_dispatch)) "
            f"AND {mine})"
        ).fetchone()
        if marked:
            return None
        symbols = dict(con.execute(
            "SELECT id, COALESCE(display_name, kernel_name) FROM rocpd_info_kernel_symbol"
        ).fetchall())  # fmt: skip
        agents = dict(con.execute("SELECT id, absolute_index FROM rocpd_info_agent").fetchall())
        streams = dict(con.execute(
            "SELECT id, JSON_EXTRACT(extdata, '$.stream') FROM rocpd_info_stream"
        ).fetchall())  # fmt: skip
        objs = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        cols = [f'K."{c}" AS "{c}"' for c in _DISPATCH_COLS.values() if c in kd]
        # the launch correlation: the event's stack_id (correlation_id is the external id),
        # joined as the row-by-row reader joins it (NULL where no event row or no table)
        sql = (
            f"SELECT K.kernel_id, K.agent_id, K.stream_id, "
            f"{_col(objs, 'event', 'E.stack_id')} AS correlation, {', '.join(cols)} "
            "FROM rocpd_kernel_dispatch K "
            + _join(objs, "event", "E", "E.id = K.event_id AND E.guid = K.guid")
        )
        ranges = id_ranges(first, last, ways)
        if len(ranges) == 1:
            parts = [_read_range(adbc, uri, sql, None)]
        else:
            with ThreadPoolExecutor(len(ranges) - 1) as pool:
                rest = [pool.submit(_read_range, adbc, uri, sql, r) for r in ranges[1:]]
                parts = [_read_range(adbc, uri, sql, ranges[0]), *(f.result() for f in rest)]
        tab = _assemble(parts)
        del parts
    except Exception:  # noqa: BLE001 - any surprise: the row-by-row reader decides
        if bound.expired:  # the row-by-row reader would wait as long again: say it now
            raise bound.gave_up(path) from None
        return None
    finally:
        con.close()
    return _dispatch_columns(tab, symbols, agents, streams)


# rows per batch the ADBC driver hands over (its default, 1024, made a million-dispatch rank
# 1,200 batches of 16 columns; larger ones also cost the driver ~8% less CPU)
_BATCH_OPTION = "adbc.sqlite.query.batch_rows"
_BATCH_ROWS = 1 << 16
# the fewest dispatch ids a range read in its own thread covers: below it a thread and a
# connection cost more than they save
RANGE_IDS = 1 << 18


def id_ranges(first: int | None, last: int | None, ways: int) -> list[tuple[int, int] | None]:
    """The dispatch id ranges (first, last inclusive) read at once: at most ``ways``, each of at
    least :data:`RANGE_IDS` ids; ``[None]`` (the whole table) when one read does."""
    if not isinstance(first, int) or not isinstance(last, int):  # no rows, or ids not integers
        return [None]
    k = min(ways, (last - first + 1) // RANGE_IDS)
    if k < 2:
        return [None]
    span = last - first + 1
    cuts = [first + span * i // k for i in range(k + 1)]
    return [(cuts[i], cuts[i + 1] - 1) for i in range(k)]


def _read_range(adbc: Any, uri: str, sql: str, ids: tuple[int, int] | None) -> _Parts:
    where = "" if ids is None else f"WHERE K.id BETWEEN {int(ids[0])} AND {int(ids[1])} "
    with adbc.connect(uri) as ac, ac.cursor() as cur:
        cur.adbc_statement.set_options(**{_BATCH_OPTION: str(_BATCH_ROWS)})
        cur.execute(sql + where + "ORDER BY K.id")
        return _batches(cur.fetch_record_batch())


_Column = tuple[np.ndarray, "np.ndarray | None"]


class _Parts:
    """One query's integer columns as NumPy pieces, a batch each: int64 values (NULL as
    NULL_INT) and, where a batch holds NULLs, (first row, NULL mask)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.vals: dict[str, list[np.ndarray]] = {c: [] for c in names}
        self.nulls: dict[str, list[tuple[int, np.ndarray]]] = {}
        self.n = 0


def _batches(reader: Any) -> _Parts:
    """A query's batches copied out into NumPy and dropped, so a read holds its columns once,
    never beside the driver's whole result (an Arrow table of it, then joined per column, held
    them twice over). Raises ValueError for a column that is not integers."""
    import pyarrow as pa

    out = _Parts(list(reader.schema.names))
    for f in reader.schema:
        if not pa.types.is_integer(f.type) and not pa.types.is_null(f.type):
            raise ValueError(f"not integers: {f.name} {f.type}")
    for batch in reader:
        for c, arr in zip(out.names, batch.columns, strict=True):
            if pa.types.is_null(arr.type):  # a batch of NULLs only (no validity bitmap)
                out.nulls.setdefault(c, []).append((out.n, np.ones(len(arr), bool)))
                out.vals[c].append(np.full(len(arr), NULL_INT, np.int64))
                continue
            if arr.null_count:
                out.nulls.setdefault(c, []).append((out.n, arrow_numpy.nulls(arr)))
            got = arrow_numpy.numbers(arr.cast(pa.int64()), NULL_INT)
            # a copy: a view would keep the driver's whole batch alive
            out.vals[c].append(np.array(got, np.int64))
        out.n += batch.num_rows
    return out


def _assemble(parts: list[_Parts]) -> dict[str, _Column]:
    """The ranges' pieces laid end to end, a column at a time (each piece freed once copied):
    per column its values and NULL mask or None."""
    counts = [p.n for p in parts]
    out: dict[str, _Column] = {}
    for c in parts[0].names:
        pieces = [v for p in parts for v in p.vals.pop(c)]
        v = pieces[0] if len(pieces) == 1 else np.concatenate([np.zeros(0, np.int64), *pieces])
        del pieces
        out[c] = (v, arrow_numpy.placed_ranges(counts, [p.nulls.pop(c, []) for p in parts]))
    return out


def _lookup(keys: np.ndarray, table: dict[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per key its value in ``table`` (an integer or None): (values, NULL mask)."""
    ids = np.array([k for k, v in table.items() if isinstance(k, int) and isinstance(v, int)])
    vals = np.array([table[k] for k in ids.tolist()], np.int64)
    if not len(ids):
        return np.full(len(keys), NULL_INT, np.int64), np.ones(len(keys), bool)
    order = np.argsort(ids)
    ids, vals = ids[order], vals[order]
    pos = np.clip(np.searchsorted(ids, keys), 0, len(ids) - 1)
    hit = ids[pos] == keys
    return np.where(hit, vals[pos], NULL_INT), ~hit


def _dispatch_columns(
    tab: dict[str, _Column],
    symbols: dict,
    agents: dict,
    streams: dict,
) -> KernelColumns | None:
    n = len(tab["kernel_id"][0])
    kid, kmask = tab.pop("kernel_id")
    aid, _ = tab.pop("agent_id")
    sid, smask = tab.pop("stream_id")
    corr, cmask = tab.pop("correlation")
    ints: dict[str, np.ndarray] = {}
    masks: dict[str, np.ndarray] = {}
    # a field the table lacks (rocprofv3 writes no graph ids) is left out, as the CSV reader
    # leaves out a column the header lacks: the store writes it NULL (a rank's two NULL
    # columns held 20 MB per million dispatches)
    for col, src in _DISPATCH_COLS.items():
        if src in tab:
            ints[col], m = tab.pop(src)
            if m is not None and m.any():
                masks[col] = m
    # names: the symbol table's, by kernel id (a dispatch without a symbol has no name)
    sym_ids = sorted(k for k in symbols if isinstance(k, int))
    names: list[str | None] = [symbols[k] for k in sym_ids] + [None]
    if not all(v is None or isinstance(v, str) for v in names):
        return None
    pos = np.searchsorted(np.array(sym_ids, np.int64), kid) if sym_ids else np.zeros(n, np.int64)
    pos = np.clip(pos, 0, max(len(sym_ids) - 1, 0))
    found = (np.array(sym_ids, np.int64)[pos] == kid) if sym_ids else np.zeros(n, bool)
    if kmask is not None:
        found &= ~kmask
    name_idx = np.where(found, pos, len(sym_ids)).astype(np.int32)
    ints["device"], dmask = _lookup(aid, agents)
    stream, st_missing = _lookup(sid, streams)  # a stream's own number, where recorded
    ints["stream"] = np.where(st_missing, sid, stream)
    ints["correlation"] = corr
    # NULL as the row-by-row reader's LEFT JOINs give it: no agent row, no stream number at all,
    # no event row or a NULL correlation id
    for col, m in (
        ("device", dmask),
        ("stream", _m(smask, n) & st_missing),
        ("correlation", _m(cmask, n)),
    ):
        if m.any():
            masks[col] = m
    return KernelColumns(names, name_idx, ints, masks)


def _m(mask: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n, bool) if mask is None else mask

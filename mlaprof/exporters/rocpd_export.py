"""Export a run to a rocpd SQLite database (schema 3.0.1) that the rocpd tools and Perfetto read
beside rocprofv3's own output.

Written as rocprofv3 writes its own (rocprofiler-sdk ``source/lib/output/generateRocpd.cpp``):
kernels become ``rocpd_kernel_dispatch`` rows (with symbol, code object, agent, queue, stream,
thread and event rows, so that the ``kernels`` view returns them), each event's ``stack_id``
the launching call's correlation id and ``correlation_id`` the external id (0); host API calls
become ``rocpd_region`` rows named by their operation (``regions`` view), their id and
``stack_id`` the call's correlation id; roctx ranges become regions named
``roctxThreadRangeA`` in category ``MARKER_CORE_RANGE_API`` with ``{"message": ...}`` in the
event's ``extdata``, marks (start == end) ``rocpd_sample`` rows on a track; mlaprof's per-layer
ranges are regions of category ``MLAPROF_LAYER`` named ``layer N``; transfers become memory
copies/allocations. mlaprof's
own fields ride in the ``extdata`` JSON columns, and its analysis tables (steps, layers, splits,
padding, memory, captures, syncs, counters, events, and each rank's trace checks, which its trust
verdict stands on: the kernels are not checked again on import) one JSON row each as
``rocpd_arg`` rows of one event of category ``MLAPROF_PAYLOAD`` (type ``mlaprof-row``, named by
the table; the process row's ``extdata`` says so), so that an export imports back to the same
run.
Streamed: every table is read row by row and inserted in batches (bench/huge_trace.py).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import os
import platform
import secrets
import sqlite3
import time
import uuid as _uuid
from collections.abc import Iterable, Iterator
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mlaprof.errors import MlaprofError
from mlaprof.exporters.folder_output import write_folder
from mlaprof.exporters.jsontext import json_objects, jsonable
from mlaprof.exporters.process_layout import process_prefixes, rank_places
from mlaprof.formats import rocpd_schema as rs
from mlaprof.formats.rocpd_schema import (
    KERNEL_CATEGORY,
    LAYER_CATEGORY,
    PAYLOAD_ARG,
    PAYLOAD_CATEGORY,
    PAYLOAD_TABLES,
    RANGE_OP,
)
from mlaprof.importers.common import agent_ref
from mlaprof.store import trace_checks as checks_table
from mlaprof.store.liveness import ENDED_EARLY, EXPORTED_REASON, EXPORTED_STATUS
from mlaprof.store.rows import iter_batches, iter_rows, typed
from mlaprof.store.schema import TABLES

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

_T = TypeVar("_T")


def uuid7() -> _uuid.UUID:
    """A UUIDv7 (time-ordered), as rocprofv3 uses for table suffixes."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    return _uuid.UUID(int=value)


def _addr(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(str(v), 0)
    except ValueError:
        return None


def export_rocpd(run: Run, out: Path) -> dict[str, int]:
    """Write ``out`` (must not exist); returns row counts per rocpd table (summed over the
    ranks). A run of one rank is one database at ``out``. A run of several is a folder at
    ``out`` with one database per rank, as rocprofv3 writes one per process: each holds that
    rank's rows only, at ``<host>/<pid>_results.db`` where the run knows every rank's host and
    pid, else ``rank<N>/[<pid>_]results.db`` (mlaprof.exporters.process_layout), so that an
    import of the folder reads each back as its own rank."""
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    if len(run.ranks) <= 1:
        return _export_file(run, out, None)

    def fill(tmp: Path) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rank, pre in process_prefixes(run).items():
            db = tmp / f"{pre}results.db"
            db.parent.mkdir(parents=True, exist_ok=True)
            for k, n in _export_file(_OneRank(run, rank), db, rank).items():
                counts[k] = counts.get(k, 0) + n
        return counts

    return write_folder(out, fill)


class _OneRank:
    """The run as one rank's process, for the writer: ``ranks`` is that rank alone, so every
    table it streams (all of them by rank) holds that rank's rows; the rest is the run's."""

    def __init__(self, run: Run, rank: int) -> None:
        self._run, self.ranks = run, [rank]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)


def _export_file(run: Run, out: Path, rank: int | None) -> dict[str, int]:
    """One database at ``out``: every rank of ``run`` (one) as one process; ``rank``: the rank
    it is, in an export of several (recorded in the process row)."""
    u = uuid7()
    suffix = "_" + str(u).replace("-", "_")
    guid = str(u)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    con: sqlite3.Connection | None = None
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        counts = _write(con, run, suffix, guid, rank)
        con.close()
        os.replace(tmp, out)
    except (sqlite3.Error, OSError) as e:
        # full disk, read-only folder, missing permission: one line, nothing left behind
        _discard(con, tmp)
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise MlaprofError(f"cannot write {out}: {why}") from None
    except BaseException:
        _discard(con, tmp)
        raise
    return counts


def _discard(con: sqlite3.Connection | None, tmp: Path) -> None:
    if con is not None:
        con.close()
    for p in (tmp, tmp.with_name(tmp.name + "-journal")):
        with contextlib.suppress(OSError):  # a read-only folder refuses this too
            p.unlink(missing_ok=True)


BATCH_ROWS = 10_000  # rows per executemany: memory holds a batch, never a table


class _Batches:
    """Rows waiting for their ``executemany``, per statement, flushed together every
    :data:`BATCH_ROWS` rows in the order the statements were first used (each table's rows keep
    their order, so their ids are those one insert at a time would give)."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.pending: dict[str, list[tuple[Any, ...]]] = {}
        self.n = 0

    def add(self, sql: str, row: tuple[Any, ...]) -> None:
        self.pending.setdefault(sql, []).append(row)
        self.n += 1
        if self.n >= BATCH_ROWS:
            self.flush()

    def many(self, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
        """``rows`` (a batch already made) written now, after what waits."""
        self.flush()
        insert_rows(self.con, sql, rows)

    def flush(self) -> None:
        for sql, batch in self.pending.items():
            if batch:
                insert_rows(self.con, sql, batch)
                batch.clear()
        self.n = 0


ROWS_PER_INSERT = 500  # rows of one multi-row INSERT (18 values a dispatch row: 9,000 values)


def insert_rows(con: sqlite3.Connection, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """``executemany(sql, rows)`` as multi-row ``INSERT ... VALUES (...), (...)`` statements of
    :data:`ROWS_PER_INSERT` rows (fewer where the connection's limit on values is lower): the
    rows in the same order (autoincrement ids as one insert at a time gives them), at about
    half SQLite's time per row (one statement's set-up and sequence update for many rows)."""
    head, one = sql.split(" VALUES ", 1)
    width = one.count("?")
    if width == 0:
        con.executemany(sql, rows)
        return
    limit = con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    per = max(1, min(ROWS_PER_INSERT, limit // width))
    full = f"{head} VALUES {','.join([one] * per)}"
    for chunk in _chunks(rows, per):
        text = full if len(chunk) == per else f"{head} VALUES {','.join([one] * len(chunk))}"
        con.execute(text, list(itertools.chain.from_iterable(chunk)))


def _write(
    con: sqlite3.Connection, run: Run, suffix: str, guid: str, rank: int | None = None
) -> dict[str, int]:
    """Every table streamed from the run's rows (:func:`iter_rows`) in batches: memory holds a
    batch and the id maps (names, agents, streams), never a table (bench/huge_trace.py)."""
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("BEGIN")
    for ddl in rs.table_ddl(suffix, guid):
        con.execute(ddl)
    for ddl in rs.DATA_VIEWS:
        con.execute(ddl)
    t = {name: f'"rocpd_{name}{suffix}"' for name in rs.TABLES}
    md = f'"rocpd_metadata{suffix}"'
    for tag, value in (("schema_version", rs.SCHEMA_VERSION), ("uuid", suffix), ("guid", guid)):
        con.execute(f"INSERT INTO {md} (tag, value) VALUES (?, ?)", (tag, value))
    out = _Batches(con)

    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            cur = con.execute(f"INSERT INTO {t['string']} (guid, string) VALUES (?, ?)", (guid, s))
            strings[s] = int(cur.lastrowid or 0)
        return strings[s]

    meta = dict(run.written_meta)  # run.json as written: what an import of the file restores
    if run.status in ENDED_EARLY:  # an import of the file is that run: killed, failed, stopped
        meta[EXPORTED_STATUS], meta[EXPORTED_REASON] = str(run.status), run.reason
    # the process: its host and pid as the run recorded them (an import's), else the pid of
    # its API calls and this machine
    host, pid = rank_places(run).get(run.ranks[0], (None, None)) if run.ranks else (None, None)
    if pid is None:
        pid = next((a["pid"] for a in iter_rows(run, "api") if a["pid"] is not None), None) or 1
    host = host or platform.node() or "localhost"
    con.execute(
        f"INSERT INTO {t['info_node']} (id, guid, hash, machine_id, hostname, system_name) "
        "VALUES (1, ?, ?, ?, ?, ?)",
        (guid, abs(hash(host)) % (1 << 62), host, host, platform.system()),
    )
    # the analysis tables' rows are the arguments of one payload event (a 10M-kernel import's
    # layers would make one JSON value of hundreds of MB); the process row says so
    payload = {
        "mlaprof": {
            "run": {k: meta.get(k) for k in ("name", "source", "backend", "device", "scenario")},
            "meta": meta,
            "tables_in": PAYLOAD_ARG,
            # which rank of the run this process is, in an export of several (a database each)
            **({"rank": rank} if rank is not None else {}),
        }
    }
    con.execute(
        f"INSERT INTO {t['info_process']} (id, guid, nid, pid, init, fini, start, end, command, "
        "extdata) VALUES (1, ?, 1, ?, NULL, NULL, NULL, NULL, ?, ?)",
        (guid, pid, f"mlaprof run {run.name}", json.dumps(payload)),
    )
    threads: dict[int, int] = {}

    def thread_id(tid: int | None) -> int:
        tid = pid if tid is None else tid
        if tid not in threads:
            cur = con.execute(
                f"INSERT INTO {t['info_thread']} (guid, nid, pid, tid, name) VALUES (?, 1, 1, ?, ?)",
                (guid, tid, f"thread {tid}"),
            )
            threads[tid] = int(cur.lastrowid or 0)
        return threads[tid]

    agents: dict[tuple[bool, str], int] = {}

    # an imported trace's kernels ran on GPUs whatever their number (a type-relative trace's
    # "GPU 0" is device 0, the number the default numbering gives the host's CPU node); a
    # recorded run's device 0 is where it ran, its CPU for a run on the CPU
    gpu_kernels = meta.get("kind") == "trace"

    def agent_id(key: Any, kernel: bool = False) -> int:
        """The agent row of a kernel's device (``kernel``) or of a transfer's end as the trace
        wrote it: "CPU N" is a CPU, "Agent 0" (rocprofv3's first node) and 0 are taken for the
        host CPU, except a trace's kernel device (:data:`gpu_kernels`)."""
        label = "None" if key is None else str(key)
        slot = (kernel and gpu_kernels, label)  # a trace's kernel device 0 is its own row
        if slot not in agents:
            try:
                ref = agent_ref(key)
            except MlaprofError:
                ref = None
            idx = None if ref is None else ref[1]
            cpu = not slot[0] and (
                (ref is not None and ref[0] == "cpu") or label.strip().lower() in ("agent 0", "0")
            )
            cur = con.execute(
                f"INSERT INTO {t['info_agent']} (guid, nid, pid, type, absolute_index, "
                "logical_index, type_index, name, extdata) VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?)",
                (
                    guid,
                    "CPU" if cpu else "GPU",
                    idx,
                    idx,
                    idx,
                    label,
                    json.dumps({"mlaprof_agent": key}),
                ),
            )
            agents[slot] = int(cur.lastrowid or 0)
        return agents[slot]

    queues: dict[int, int] = {}
    streams: dict[Any, int] = {}
    symbols: dict[str, int] = {}
    code_objects: dict[int, int] = {}

    def kernel_refs(name: str, device: Any, stream: Any) -> tuple[int, int, int, int]:
        a = agent_id(device, kernel=True)
        if a not in queues:
            cur = con.execute(
                f"INSERT INTO {t['info_queue']} (guid, nid, pid, name) VALUES (?, 1, 1, ?)",
                (guid, f"Queue {len(queues)}"),
            )
            queues[a] = int(cur.lastrowid or 0)
            cur = con.execute(
                f"INSERT INTO {t['info_code_object']} (guid, nid, pid, agent_id, uri, "
                "storage_type) VALUES (?, 1, 1, ?, ?, 'MEMORY')",
                (guid, a, "mlaprof://imported"),
            )
            code_objects[a] = int(cur.lastrowid or 0)
        if stream not in streams:
            cur = con.execute(
                f"INSERT INTO {t['info_stream']} (guid, nid, pid, name, extdata) "
                "VALUES (?, 1, 1, ?, ?)",
                (guid, f"Stream {stream}", json.dumps({"stream": stream})),
            )
            streams[stream] = int(cur.lastrowid or 0)
        if name not in symbols:
            cur = con.execute(
                f"INSERT INTO {t['info_kernel_symbol']} (guid, nid, pid, code_object_id, "
                "kernel_name, display_name) VALUES (?, 1, 1, ?, ?, ?)",
                (guid, code_objects[a], name, name),
            )
            symbols[name] = int(cur.lastrowid or 0)
        return a, queues[a], streams[stream], symbols[name]

    cat_kernel = sid(KERNEL_CATEGORY)
    main_tid = thread_id(None)
    # event ids are given (the dependent rows name them before the batch is written), counted
    # as the table would number them
    n_events = 0

    def event(*row: Any) -> int:
        nonlocal n_events
        n_events += 1
        out.add(ev_sql, (n_events, guid, *row))
        return n_events

    # stack_id: the internal (launch) correlation id, which the rocpd views and converters read;
    # correlation_id: the external id, 0 as rocprofv3 writes it without kernel rename
    ev_sql = (
        f"INSERT INTO {t['event']} (id, guid, category_id, stack_id, parent_stack_id, "
        "correlation_id, extdata) VALUES (?, ?, ?, ?, ?, 0, ?)"
    )
    kd_sql = (
        f"INSERT INTO {t['kernel_dispatch']} (guid, nid, pid, tid, agent_id, kernel_id, "
        "dispatch_id, queue_id, stream_id, start, end, workgroup_size_x, workgroup_size_y, "
        "workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id, "
        "extdata) VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    n_kernels = 0
    t0: int | None = None
    t1: int | None = None
    for cols, lo, hi in _kernel_columns(run):
        n = len(cols["name"])
        # the rows' references, made in order of first use (as one row at a time made them)
        keys = list(zip(cols["name"], cols["device"], cols["stream"], strict=True))
        refs = {k: (*kernel_refs(*k), sid(k[0])) for k in dict.fromkeys(keys)}
        a, q, st, sym, name_id = zip(*map(refs.__getitem__, keys), strict=True)
        evs = range(n_events + 1, n_events + n + 1)
        n_events += n
        c = cols["correlation"]
        out.many(ev_sql, zip(evs, repeat(guid), repeat(cat_kernel), c, c, repeat("{}")))
        kd = (repeat(guid), repeat(main_tid), a, sym, range(n_kernels + 1, n_kernels + n + 1),
              q, st, *(cols[f] for f in _DISPATCH_FIELDS), name_id, evs, cols["extdata"])  # fmt: skip
        out.many(kd_sql, zip(*kd, strict=False))  # repeat(): endless
        n_kernels += n
        t0 = lo if t0 is None or (lo is not None and lo < t0) else t0
        t1 = hi if t1 is None or (hi is not None and hi > t1) else t1
    con.execute(
        f"UPDATE {t['info_process']} SET init = ?, fini = ?, start = ?, end = ? WHERE id = 1",
        (t0, t1, t0, t1),
    )

    reg_sql = (
        f"INSERT INTO {t['region']} (id, guid, nid, pid, tid, start, end, name_id, event_id, "
        "extdata) VALUES (?, ?, 1, 1, ?, ?, ?, ?, ?, ?)"
    )
    # a region's id is its call's correlation id where those are unique (rocprofv3's layout)
    n_api, by_corr = _unique_correlations(run)
    n_samples = 0
    track: int | None = None
    for a in iter_rows(run, "api"):
        domain = a["domain"] or "API"
        fn = a["function"] or ""
        c = a["correlation"]
        marker = "MARKER" in domain.upper()
        extdata = json.dumps({"message": fn}) if marker else "{}"
        ev = event(sid(domain), c, c, extdata)
        extra = json.dumps({"mlaprof_api": {k: a[k] for k in a if k != "rank"}})
        if marker and a["start_ns"] is not None and a["start_ns"] == a["end_ns"]:
            if track is None:
                track = con.execute(
                    f"INSERT INTO {t['track']} (guid, nid, pid, tid, name_id) "
                    "VALUES (?, 1, 1, ?, ?)",
                    (guid, thread_id(a["tid"]), sid(domain)),
                ).lastrowid
            out.add(
                f"INSERT INTO {t['sample']} (guid, track_id, timestamp, event_id, extdata) "
                "VALUES (?, ?, ?, ?, ?)",
                (guid, track, a["start_ns"], ev, extra),
            )
            n_samples += 1
            continue
        out.add(
            reg_sql,
            (
                c if by_corr else None,
                guid,
                thread_id(a["tid"]),
                a["start_ns"] or 0,
                a["end_ns"] or 0,
                sid(RANGE_OP if marker else fn),
                ev,
                extra,
            ),
        )
    cat_layer = sid(LAYER_CATEGORY)
    n_layer_regions = 0
    for lay in _layer_columns(run):
        n = len(lay["start"])
        names = {v: sid(f"layer {v}") for v in dict.fromkeys(lay["layer"])}  # in order of use
        evs = range(n_events + 1, n_events + n + 1)
        n_events += n
        out.many(ev_sql, zip(evs, repeat(guid), repeat(cat_layer), repeat(None), repeat(None),
                             repeat("{}")))  # fmt: skip
        ends = map(operator.add, lay["start"], lay["duration"])
        regions = (repeat(None), repeat(guid), repeat(main_tid), lay["start"], ends,
                   map(names.__getitem__, lay["layer"]), evs, lay["extdata"])  # fmt: skip
        out.many(reg_sql, zip(*regions, strict=False))  # repeat(): endless
        n_layer_regions += n

    n_copy = n_alloc = 0
    for x in iter_rows(run, "transfers"):
        extra = json.dumps({"mlaprof_transfer": {c: x[c] for c in x if c != "rank"}})
        kind = (x["kind"] or "").upper()
        c = x["correlation"]
        ev = event(sid(kind or "MEMORY"), c, c, "{}")
        if "ALLOC" in kind:
            op = (x["operation"] or "").upper()
            typ = "FREE" if "FREE" in op else "ALLOC" if "ALLOC" in op else None
            out.add(
                f"INSERT INTO {t['memory_allocate']} (guid, nid, pid, tid, agent_id, type, level, "
                "start, end, address, size, event_id, extdata) "
                "VALUES (?, 1, 1, ?, ?, ?, 'REAL', ?, ?, ?, ?, ?, ?)",
                (
                    guid,
                    main_tid,
                    agent_id(x["dst_agent"]),
                    typ,
                    x["start_ns"] or 0,
                    x["end_ns"] or 0,
                    _addr(x["address"]),
                    x["size_bytes"] or 0,
                    ev,
                    extra,
                ),
            )
            n_alloc += 1
        else:
            out.add(
                f"INSERT INTO {t['memory_copy']} (guid, nid, pid, tid, start, end, name_id, "
                "dst_agent_id, src_agent_id, size, event_id, extdata) "
                "VALUES (?, 1, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    guid,
                    main_tid,
                    x["start_ns"] or 0,
                    x["end_ns"] or 0,
                    sid(x["operation"] or kind or "MEMORY_COPY"),
                    agent_id(x["dst_agent"]),
                    agent_id(x["src_agent"]),
                    x["size_bytes"] or 0,
                    ev,
                    extra,
                ),
            )
            n_copy += 1
    # last, so that every other event keeps the id it had when the payload rode in extdata
    pay_ev = event(sid(PAYLOAD_CATEGORY), None, None, "{}")
    arg_sql = (
        f"INSERT INTO {t['arg']} (guid, event_id, position, type, name, value) "
        "VALUES (?, ?, ?, ?, ?, ?)"
    )
    pos = 0
    for name in PAYLOAD_TABLES:
        for values in _payload_rows(run, name):
            out.many(arg_sql, zip(repeat(guid), repeat(pay_ev), range(pos, pos + len(values)),
                                  repeat(PAYLOAD_ARG), repeat(name), values))  # fmt: skip
            pos += len(values)
    out.flush()
    con.execute("COMMIT")
    return {
        "kernel_dispatch": n_kernels,
        "region": n_api - n_samples + n_layer_regions,
        "sample": n_samples,
        "memory_copy": n_copy,
        "memory_allocate": n_alloc,
    }


# a dispatch row's columns that hold 0 for an unknown value
_DISPATCH_FIELDS = ("start_ns", "end_ns", "block_x", "block_y", "block_z", "grid_x", "grid_y",
                    "grid_z")  # fmt: skip


def _kernel_columns(run: Run) -> Iterator[tuple[dict[str, list[Any]], Any, Any]]:
    """Every rank's kernels in storage order, a batch at a time: (columns as lists, the earliest
    start, the latest end). ``name`` is ``<unnamed>`` where unknown, the ``_DISPATCH_FIELDS`` 0
    where unknown, ``extdata`` the row's ``json.dumps({"mlaprof": row})``. A rank with typed
    columns goes an Arrow batch at a time, its text built column by column
    (:mod:`mlaprof.exporters.jsontext`); one whose database holds other values goes a row at a
    time through ``json.dumps``. A Python call per row was most of an 11M-kernel export."""
    cols = [c for c, _ in TABLES["kernels"]]
    for rank in run.ranks:
        if typed(run, "kernels", rank, cols):
            for batch in iter_batches(run, "kernels", rank, cols):
                if batch.num_rows:
                    yield _typed_kernels(batch, cols)
            continue
        for chunk in _chunks(iter_rows(run, "kernels", rank)):
            yield _row_kernels(chunk, cols)


def _typed_kernels(batch: Any, cols: list[str]) -> tuple[dict[str, list[Any]], Any, Any]:
    import pyarrow.compute as pc

    out = {c: batch.column(c).to_pylist() for c in ("device", "stream", "correlation")}
    out["name"] = pc.fill_null(batch.column("name"), "<unnamed>").to_pylist()
    for c in _DISPATCH_FIELDS:
        out[c] = pc.fill_null(batch.column(c), 0).to_pylist()
    out["extdata"] = json_objects(batch, cols, '{"mlaprof": {', "}}").to_pylist()
    lo = pc.min(batch.column("start_ns")).as_py()
    return out, lo, pc.max(batch.column("end_ns")).as_py()


def _row_kernels(
    rows: list[dict[str, Any]], cols: list[str]
) -> tuple[dict[str, list[Any]], Any, Any]:
    out: dict[str, list[Any]] = {
        c: [k[c] for k in rows] for c in ("device", "stream", "correlation")
    }
    out["name"] = [k["name"] if k["name"] is not None else "<unnamed>" for k in rows]
    for c in _DISPATCH_FIELDS:
        out[c] = [k[c] or 0 for k in rows]
    out["extdata"] = [json.dumps({"mlaprof": {c: k[c] for c in cols}}) for k in rows]
    lo = min((k["start_ns"] for k in rows if k["start_ns"] is not None), default=None)
    hi = max((k["end_ns"] for k in rows if k["end_ns"] is not None), default=None)
    return out, lo, hi


_LAYER_COLS = ["step", "layer", "t_start_ns", "duration_ns"]


def _layer_columns(run: Run) -> Iterator[dict[str, list[Any]]]:
    """Every rank's timed layers (start and duration known) in storage order, a batch at a time:
    ``start``, ``duration``, ``layer`` and ``extdata`` (``{"mlaprof_layer": {step, layer}}``)."""
    import pyarrow.compute as pc

    for rank in run.ranks:
        if typed(run, "layers", rank, _LAYER_COLS):
            for batch in iter_batches(run, "layers", rank, _LAYER_COLS):
                keep = pc.and_(pc.is_valid(batch.column("t_start_ns")),
                               pc.is_valid(batch.column("duration_ns")))  # fmt: skip
                batch = batch.filter(keep)
                if batch.num_rows:
                    ext = json_objects(batch, ["step", "layer"], '{"mlaprof_layer": {', "}}")
                    yield {"start": batch.column("t_start_ns").to_pylist(),
                           "duration": batch.column("duration_ns").to_pylist(),
                           "layer": batch.column("layer").to_pylist(), "extdata": ext.to_pylist()}  # fmt: skip
            continue
        timed = (r for r in iter_rows(run, "layers", rank)
                 if r["t_start_ns"] is not None and r["duration_ns"] is not None)  # fmt: skip
        for chunk in _chunks(timed):
            yield {"start": [r["t_start_ns"] for r in chunk],
                   "duration": [r["duration_ns"] for r in chunk],
                   "layer": [r["layer"] for r in chunk],
                   "extdata": [json.dumps({"mlaprof_layer": {"step": r["step"], "layer": r["layer"]}})
                               for r in chunk]}  # fmt: skip


def _chunks(rows: Iterable[_T], size: int = BATCH_ROWS) -> Iterator[list[_T]]:
    """``rows`` in lists of at most ``size`` (the row-by-row paths' batches, an INSERT's rows)."""
    it = iter(rows)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def _payload_rows(run: Run, name: str) -> Iterator[list[str]]:
    """``json.dumps`` of each row of the analysis table ``name`` (``rank`` first), every rank
    in storage order, a batch at a time: built by column where the rank's columns are typed
    integers and text, row by row otherwise."""
    if name == checks_table.TABLE:
        yield from _check_rows(run)
        return
    types = dict(TABLES[name])
    cols = list(types)
    for rank in run.ranks:
        if jsonable(types, cols) and typed(run, name, rank, cols):
            head = "{" + json.dumps("rank") + f": {int(rank)}, "
            for batch in iter_batches(run, name, rank, cols):
                if batch.num_rows:
                    yield json_objects(batch, cols, head, "}").to_pylist()
            continue
        for chunk in _chunks(iter_rows(run, name, rank)):
            yield [json.dumps(r) for r in chunk]


def _check_rows(run: Run) -> Iterator[list[str]]:
    """Each rank's trace checks as payload rows, as the reader serves them (a run written before
    the table kept them in run.json: migrated on read). An older import's sum over its ranks
    (rank -1) is no rank's own: not carried."""
    checks = run.trace_checks()
    cols = [c for c, _ in TABLES[checks_table.TABLE]]
    for rank in run.ranks:
        mine = checks.get(rank)
        if mine:
            yield [
                json.dumps({"rank": int(rank), **dict(zip(cols, r, strict=True))})
                for r in checks_table.rows(mine.groups)
            ]


def _unique_correlations(run: Run) -> tuple[int, bool]:
    """How many API calls the run's ranks hold (one in an export of several), and whether every
    one carries a correlation id no other call carries: counted in SQL, not in a set of every
    id."""
    ranks = ", ".join(str(int(r)) for r in run.ranks) or "NULL"
    n, n_ids, distinct = run.query(
        "SELECT COUNT(*), COUNT(correlation), COUNT(DISTINCT correlation) FROM api "
        f"WHERE rank IN ({ranks})"
    ).iloc[0]
    return int(n), int(n_ids) == int(n) and int(distinct) == int(n)

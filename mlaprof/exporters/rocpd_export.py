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
padding, memory, captures, syncs, counters, events) one JSON row each as ``rocpd_arg`` rows of
one event of category ``MLAPROF_PAYLOAD`` (type ``mlaprof-row``, named by the table; the process
row's ``extdata`` says so), so that an export imports back to the same run.
Streamed: every table is read row by row and inserted in batches (bench/huge_trace.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import sqlite3
import time
import uuid as _uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.formats import rocpd_schema as rs
from mlaprof.formats.rocpd_schema import (
    KERNEL_CATEGORY,
    LAYER_CATEGORY,
    PAYLOAD_ARG,
    PAYLOAD_CATEGORY,
    PAYLOAD_TABLES,
    RANGE_OP,
)
from mlaprof.importers.common import agent_index
from mlaprof.store.rows import iter_batches, iter_rows, typed
from mlaprof.store.schema import TABLES

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


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
    """Write ``out`` (must not exist); returns row counts per rocpd table."""
    if out.exists():
        raise MlaprofError(f"{out} already exists; refusing to overwrite")
    u = uuid7()
    suffix = "_" + str(u).replace("-", "_")
    guid = str(u)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    con: sqlite3.Connection | None = None
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        counts = _write(con, run, suffix, guid)
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

    def flush(self) -> None:
        for sql, batch in self.pending.items():
            if batch:
                self.con.executemany(sql, batch)
                batch.clear()
        self.n = 0


def _write(con: sqlite3.Connection, run: Run, suffix: str, guid: str) -> dict[str, int]:
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

    meta = run.meta
    pid = next((a["pid"] for a in iter_rows(run, "api") if a["pid"] is not None), None) or 1

    host = platform.node() or "localhost"
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

    agents: dict[str, int] = {}

    def agent_id(key: Any) -> int:
        label = "None" if key is None else str(key)
        if label not in agents:
            try:
                idx = agent_index(key)
            except MlaprofError:
                idx = None
            cpu = label.strip().lower() in ("agent 0", "0")
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
            agents[label] = int(cur.lastrowid or 0)
        return agents[label]

    queues: dict[int, int] = {}
    streams: dict[Any, int] = {}
    symbols: dict[str, int] = {}
    code_objects: dict[int, int] = {}

    def kernel_refs(name: str, device: Any, stream: Any) -> tuple[int, int, int, int]:
        a = agent_id(device)
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
    for kname, dev, stream, c, start, end, bx, by, bz, gx, gy, gz, extdata in _kernels(run):
        name = kname if kname is not None else "<unnamed>"
        a, q, st, sym = kernel_refs(name, dev, stream)
        ev = event(cat_kernel, c, c, "{}")
        if start is not None and (t0 is None or start < t0):
            t0 = start
        if end is not None and (t1 is None or end > t1):
            t1 = end
        n_kernels += 1
        out.add(kd_sql, (guid, main_tid, a, sym, n_kernels, q, st, start or 0, end or 0, bx or 0,
                         by or 0, bz or 0, gx or 0, gy or 0, gz or 0, sid(name), ev, extdata))  # fmt: skip
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
    for lay in iter_rows(run, "layers"):
        if lay["t_start_ns"] is None or lay["duration_ns"] is None:
            continue
        ev = event(cat_layer, None, None, "{}")
        out.add(
            reg_sql,
            (
                None,
                guid,
                main_tid,
                lay["t_start_ns"],
                lay["t_start_ns"] + lay["duration_ns"],
                sid(f"layer {lay['layer']}"),
                ev,
                json.dumps({"mlaprof_layer": {"step": lay["step"], "layer": lay["layer"]}}),
            ),
        )
        n_layer_regions += 1

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
        for r in iter_rows(run, name):
            out.add(arg_sql, (guid, pay_ev, pos, PAYLOAD_ARG, name, json.dumps(r)))
            pos += 1
    out.flush()
    con.execute("COMMIT")
    return {
        "kernel_dispatch": n_kernels,
        "region": n_api - n_samples + n_layer_regions,
        "sample": n_samples,
        "memory_copy": n_copy,
        "memory_allocate": n_alloc,
    }


_KERNEL_FIELDS = ["name", "device", "stream", "correlation", "start_ns", "end_ns", "block_x",
                  "block_y", "block_z", "grid_x", "grid_y", "grid_z"]  # fmt: skip


def _kernels(run: Run) -> Iterator[tuple[Any, ...]]:
    """Every rank's kernels as (the ``_KERNEL_FIELDS``..., ``extdata`` JSON), in storage order.
    A rank with typed columns goes an Arrow batch at a time, its ``extdata`` text built column
    by column (what ``json.dumps`` writes: a name's JSON once per distinct name, integers as
    digits, null); one whose database holds other values goes a row at a time through
    ``json.dumps``. The per-row dict and ``json.dumps`` were most of an 11M-kernel export."""
    cols = [c for c, _ in TABLES["kernels"]]
    for rank in run.ranks:
        if not typed(run, "kernels", rank, cols):
            for k in iter_rows(run, "kernels", rank):
                extra = {c: k[c] for c in k if c != "rank"}
                yield (*(k[c] for c in _KERNEL_FIELDS), json.dumps({"mlaprof": extra}))
            continue
        for batch in iter_batches(run, "kernels", rank, cols):
            if batch.num_rows:
                ext = _extdata(batch, cols)
                yield from zip(*(batch.column(c).to_pylist() for c in _KERNEL_FIELDS),
                               ext.to_pylist(), strict=True)  # fmt: skip


def _extdata(batch: Any, cols: list[str]) -> Any:
    """``json.dumps({"mlaprof": row})`` of each row of a typed kernel batch, as one Arrow
    column (integers and text only: what :func:`mlaprof.store.rows.typed` let through)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pieces: list[Any] = []
    for i, c in enumerate(cols):
        pieces.append(('{"mlaprof": {' if i == 0 else ", ") + json.dumps(c) + ": ")
        col = batch.column(c)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            uniq = pc.unique(col.drop_null())
            text = pa.array([json.dumps(u) for u in uniq.to_pylist()], pa.string())
            col = text.take(pc.index_in(col, value_set=uniq))
        else:
            col = col.cast(pa.string())
        pieces.append(pc.fill_null(col, "null"))
    pieces.append("}}")
    return pc.binary_join_element_wise(*pieces, "")


def _unique_correlations(run: Run) -> tuple[int, bool]:
    """How many API calls the run holds (all ranks), and whether every one carries a
    correlation id no other call carries: counted in SQL, not in a set of every id."""
    n, n_ids, distinct = run.query(
        "SELECT COUNT(*), COUNT(correlation), COUNT(DISTINCT correlation) FROM api"
    ).iloc[0]
    return int(n), int(n_ids) == int(n) and int(distinct) == int(n)

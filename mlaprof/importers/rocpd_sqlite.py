"""rocpd SQLite importer: rocprofv3's default output (``<prefix>_results.db``) and mlaprof's own
rocpd exports.

Reads the unsuffixed ``rocpd_*`` views (they exist in every rocpd database, over one or several
uuid-suffixed table sets) with its own joins, so that it does not depend on the data views.
mlaprof's extra fields, when the database is an mlaprof export, come back from ``extdata``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.formats.rocpd_schema import LAYER_CATEGORY, PAYLOAD_TABLES
from mlaprof.importers.annotate import KernelColumns, write_kernels
from mlaprof.importers.common import ImportSummary
from mlaprof.importers.rocprof_csv import _TRANSFER_COLS, KERNEL_COLS
from mlaprof.store.schema import TABLES
from mlaprof.store.staging import BulkWriter

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


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
    path: Path, bulk: BulkWriter, summary: ImportSummary
) -> tuple[dict[str, Any], KernelColumns | None]:
    """Import a rocpd database. Returns the embedded mlaprof run metadata ({} if none) and the
    kernels that still need annotation (those without mlaprof's own fields)."""
    if not is_sqlite(path):
        raise MlaprofError(f"{path} is not an SQLite database")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise MlaprofError(f"cannot open {path}: {e}") from None
    try:
        return _import(con, path, bulk, summary)
    except sqlite3.Error as e:
        raise MlaprofError(f"{path} is not a readable rocpd database ({e})") from None
    finally:
        con.close()


def _import(
    con: sqlite3.Connection, path: Path, bulk: BulkWriter, summary: ImportSummary
) -> tuple[dict[str, Any], KernelColumns | None]:
    objs = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    needed = {"rocpd_metadata", "rocpd_kernel_dispatch", "rocpd_string", "rocpd_region"}
    if not needed <= objs:
        missing = ", ".join(sorted(needed - objs))
        raise MlaprofError(f"{path} is not a rocpd database (missing {missing})")
    tags = dict(con.execute("SELECT tag, value FROM rocpd_metadata").fetchall())
    if not str(tags.get("schema_version", "")).startswith("3."):
        raise MlaprofError(
            f"{path}: unsupported rocpd schema version {tags.get('schema_version')!r} (need 3.x)"
        )
    kd = _cols(con, "rocpd_kernel_dispatch")
    graph = (
        "K.graph_exec_id, K.graph_node_id"
        if {"graph_exec_id", "graph_node_id"} <= kd
        else "NULL, NULL"
    )
    cur = con.execute(
        "SELECT COALESCE(S.display_name, S.kernel_name), K.start, K.end, A.absolute_index, "
        "COALESCE(JSON_EXTRACT(ST.extdata, '$.stream'), K.stream_id), E.correlation_id, "
        "K.grid_size_x, K.grid_size_y, K.grid_size_z, K.workgroup_size_x, K.workgroup_size_y, "
        f"K.workgroup_size_z, {graph}, K.extdata "
        "FROM rocpd_kernel_dispatch K "
        "LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
        "LEFT JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid "
        "LEFT JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid "
        "LEFT JOIN rocpd_info_stream ST ON ST.id = K.stream_id AND ST.guid = K.guid "
        "ORDER BY K.guid, K.id"
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

    api: list[list[Any]] = []
    cur = con.execute(
        "SELECT (SELECT string FROM rocpd_string C WHERE C.id = E.category_id AND C.guid = E.guid), "
        "S.string, P.pid, T.tid, E.correlation_id, R.start, R.end, R.extdata "
        "FROM rocpd_region R "
        "LEFT JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid "
        "LEFT JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid "
        "LEFT JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid "
        "LEFT JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid "
        "ORDER BY R.guid, R.id"
    )
    acols = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")
    for r in cur:
        ext = _json(r[7])
        if r[0] == LAYER_CATEGORY and "mlaprof_layer" in ext:
            continue  # mlaprof's per-layer ranges: the layers table comes back from the payload
        mine = ext.get("mlaprof_api")
        api.append([mine.get(c) for c in acols] if isinstance(mine, dict) else list(r[:7]))
    summary.add("api", bulk.insert("api", acols, api))

    xfer: list[list[Any]] = []
    for r in con.execute(
        "SELECT S.string, SA.name, DA.name, M.size, E.correlation_id, M.start, M.end, M.extdata "
        "FROM rocpd_memory_copy M "
        "LEFT JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid "
        "LEFT JOIN rocpd_info_agent SA ON SA.id = M.src_agent_id AND SA.guid = M.guid "
        "LEFT JOIN rocpd_info_agent DA ON DA.id = M.dst_agent_id AND DA.guid = M.guid "
        "LEFT JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid ORDER BY M.guid, M.id"
    ):
        mine = _json(r[7]).get("mlaprof_transfer")
        xfer.append(
            [mine.get(c) for c in _TRANSFER_COLS]
            if isinstance(mine, dict)
            else ["MEMORY_COPY", r[0], r[1], r[2], r[3], None, r[4], r[5], r[6]]
        )
    for r in con.execute(
        "SELECT M.type, A.name, M.size, M.address, E.correlation_id, M.start, M.end, M.extdata "
        "FROM rocpd_memory_allocate M "
        "LEFT JOIN rocpd_info_agent A ON A.id = M.agent_id AND A.guid = M.guid "
        "LEFT JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid ORDER BY M.guid, M.id"
    ):
        mine = _json(r[7]).get("mlaprof_transfer")
        addr = None if r[3] is None else hex(r[3])
        xfer.append(
            [mine.get(c) for c in _TRANSFER_COLS]
            if isinstance(mine, dict)
            else ["MEMORY_ALLOCATION", r[0], None, r[1], r[2], addr, r[4], r[5], r[6]]
        )
    summary.add("transfers", bulk.insert("transfers", _TRANSFER_COLS, xfer))

    if {"rocpd_pmc_event", "rocpd_info_pmc"} <= objs:
        pmc = con.execute(
            "SELECT I.name, S.display_name, PE.value, K.start FROM rocpd_pmc_event PE "
            "JOIN rocpd_info_pmc I ON I.id = PE.pmc_id AND I.guid = PE.guid "
            "LEFT JOIN rocpd_kernel_dispatch K ON K.event_id = PE.event_id AND K.guid = PE.guid "
            "LEFT JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid "
            "ORDER BY PE.guid, PE.id"
        ).fetchall()
        n = bulk.insert(
            "counters",
            ("source", "name", "key", "value", "t_ns"),
            (["rocpd-pmc", *r] for r in pmc),
        )
        summary.add("counters", n)

    # an mlaprof export carries its analysis tables in the process row
    meta: dict[str, Any] = {}
    for (ext,) in con.execute("SELECT extdata FROM rocpd_info_process ORDER BY guid, id"):
        mine = _json(ext).get("mlaprof")
        if not isinstance(mine, dict):
            continue
        meta = mine.get("meta") or {}
        tables = mine.get("tables") or {}
        for name in PAYLOAD_TABLES:
            recs = tables.get(name) or []
            if recs:
                cols = [c for c, _ in TABLES[name]]
                if not all(isinstance(x, dict) for x in recs):
                    raise MlaprofError(f"{path}: corrupt mlaprof payload in table {name}")
                summary.add(name, bulk.insert(name, cols, ([x.get(c) for c in cols] for x in recs)))
    summary.files.append(str(path))
    return meta, kernels


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

"""Write a :class:`Trace` as rocprofv3 writes its rocpd database (``<pid>_results.db``), from
rocprofiler-sdk's own writer (ROCm/rocm-systems ``projects/rocprofiler-sdk``):

- ``source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql`` (schema 3 as ROCm 7.0 writes it: the
  metadata row says ``"3"``) and ``versions/3.0.3/rocpd_tables.sql`` (graph_exec_id and
  graph_node_id on kernel dispatches, ``rocpd_graph_launch``): physical tables
  ``rocpd_<name>_<uuid>``, unsuffixed views over them (``rocpd_views.sql``), the data views of
  ``data_views.sql`` (``regions``, ``samples``, ``kernels``).
- ``source/lib/output/generateRocpd.cpp``: info_process ``id`` is the OS pid and info_thread ``id``
  the OS tid; every API record gets a ``rocpd_event`` (``stack_id`` = internal correlation id,
  ``correlation_id`` = external id) and, when it has a duration, a ``rocpd_region`` whose ``id``
  is the internal correlation id and whose name is the operation; a record with start == end
  (a roctx mark) becomes a ``rocpd_sample`` on a track named after its category; a roctx
  range's message goes into the event's ``extdata`` as ``{"message": ...}``; a dispatch's event
  gets ``stack_id`` = the launch's internal correlation id.

The DDL here is written from those files' column lists (not copied), so that the importer is
tested against the real layout and not against mlaprof's own exporter.
"""

from __future__ import annotations

import json
import sqlite3
import uuid as _uuid
import zlib
from pathlib import Path

from tests.conformance.model import RANGE_KIND, RANGE_OP, Trace

KERNEL_KIND = "KERNEL_DISPATCH"
SCHEMAS = ("3", "3.0.1", "3.0.3")  # ROCm 7.0's "3"; 3.0.2+ adds the graph columns

_COMMON = ["id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", 'guid TEXT DEFAULT "{guid}" NOT NULL']
_EXT = 'extdata JSONB DEFAULT "{{}}" NOT NULL'
# table -> its columns after id and guid (rocpd_tables.sql); "+graph": only from 3.0.2
COLUMNS: dict[str, list[str]] = {
    "string": ["string TEXT NOT NULL UNIQUE ON CONFLICT ABORT"],
    "info_node": ["hash BIGINT NOT NULL UNIQUE", "machine_id TEXT NOT NULL UNIQUE",
                  "system_name TEXT", "hostname TEXT", "release TEXT", "version TEXT",
                  "hardware_name TEXT", "domain_name TEXT"],
    "info_process": ["nid INTEGER NOT NULL", "ppid INTEGER", "pid INTEGER NOT NULL",
                     "init BIGINT", "fini BIGINT", "start BIGINT", '"end" BIGINT',
                     "command TEXT", 'environment JSONB DEFAULT "{{}}" NOT NULL', _EXT],
    "info_thread": ["nid INTEGER NOT NULL", "ppid INTEGER", "pid INTEGER NOT NULL",
                    "tid INTEGER NOT NULL", "name TEXT", "start BIGINT", '"end" BIGINT', _EXT],
    "info_agent": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL",
                   "type TEXT CHECK (type IN ('CPU', 'GPU'))", "absolute_index INTEGER",
                   "logical_index INTEGER", "type_index INTEGER", "uuid INTEGER", "name TEXT",
                   "model_name TEXT", "vendor_name TEXT", "product_name TEXT", "user_name TEXT",
                   _EXT],
    "info_queue": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "name TEXT", _EXT],
    "info_stream": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "name TEXT", _EXT],
    "info_pmc": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "agent_id INTEGER",
                 "target_arch TEXT", "event_code INT", "instance_id INTEGER",
                 "name TEXT NOT NULL", "symbol TEXT NOT NULL", "description TEXT",
                 'long_description TEXT DEFAULT ""', "component TEXT", 'units TEXT DEFAULT ""',
                 "value_type TEXT", "block TEXT", "expression TEXT", "is_constant INTEGER",
                 "is_derived INTEGER", _EXT],
    "info_code_object": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "agent_id INTEGER",
                         "uri TEXT", "load_base BIGINT", "load_size BIGINT", "load_delta BIGINT",
                         "storage_type TEXT CHECK (storage_type IN ('FILE', 'MEMORY'))", _EXT],
    "info_kernel_symbol": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL",
                           "code_object_id INTEGER NOT NULL", "kernel_name TEXT",
                           "display_name TEXT", "kernel_object INTEGER",
                           "kernarg_segment_size INTEGER", "kernarg_segment_alignment INTEGER",
                           "group_segment_size INTEGER", "private_segment_size INTEGER",
                           "sgpr_count INTEGER", "arch_vgpr_count INTEGER",
                           "accum_vgpr_count INTEGER", _EXT],
    "track": ["nid INTEGER NOT NULL", "pid INTEGER", "tid INTEGER", "name_id INTEGER", _EXT],
    "event": ["category_id INTEGER", "stack_id INTEGER", "parent_stack_id INTEGER",
              "correlation_id INTEGER", 'call_stack JSONB DEFAULT "{{}}" NOT NULL',
              'line_info JSONB DEFAULT "{{}}" NOT NULL', _EXT],
    "arg": ["event_id INTEGER NOT NULL", "position INTEGER NOT NULL", "type TEXT NOT NULL",
            "name TEXT NOT NULL", "value TEXT", _EXT],
    "pmc_event": ["event_id INTEGER", "pmc_id INTEGER NOT NULL", "value REAL DEFAULT 0.0",
                  'extdata JSONB DEFAULT "{{}}"'],
    "region": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "tid INTEGER NOT NULL",
               "start BIGINT NOT NULL", '"end" BIGINT NOT NULL', "name_id INTEGER NOT NULL",
               "event_id INTEGER", _EXT],
    "sample": ["track_id INTEGER NOT NULL", "timestamp BIGINT NOT NULL", "event_id INTEGER",
               _EXT],
    "kernel_dispatch": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "tid INTEGER",
                        "agent_id INTEGER NOT NULL", "kernel_id INTEGER NOT NULL",
                        "dispatch_id INTEGER NOT NULL", "queue_id INTEGER NOT NULL",
                        "stream_id INTEGER NOT NULL", "start BIGINT NOT NULL",
                        '"end" BIGINT NOT NULL', "private_segment_size INTEGER",
                        "group_segment_size INTEGER", "workgroup_size_x INTEGER NOT NULL",
                        "workgroup_size_y INTEGER NOT NULL", "workgroup_size_z INTEGER NOT NULL",
                        "grid_size_x INTEGER NOT NULL", "grid_size_y INTEGER NOT NULL",
                        "grid_size_z INTEGER NOT NULL", "+graph", "region_name_id INTEGER",
                        "event_id INTEGER", _EXT],
    "memory_copy": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "tid INTEGER",
                    "start BIGINT NOT NULL", '"end" BIGINT NOT NULL', "name_id INTEGER NOT NULL",
                    "dst_agent_id INTEGER", "dst_address INTEGER", "src_agent_id INTEGER",
                    "src_address INTEGER", "size INTEGER NOT NULL", "queue_id INTEGER",
                    "stream_id INTEGER", "+graph", "region_name_id INTEGER", "event_id INTEGER",
                    _EXT],
    "memory_allocate": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "tid INTEGER",
                        "agent_id INTEGER", "type TEXT", "level TEXT", "start BIGINT NOT NULL",
                        '"end" BIGINT NOT NULL', "address INTEGER", "size INTEGER NOT NULL",
                        "queue_id INTEGER", "stream_id INTEGER", "event_id INTEGER", _EXT],
    "graph_launch": ["nid INTEGER NOT NULL", "pid INTEGER NOT NULL", "tid INTEGER",
                     "agent_id INTEGER", "queue_id INTEGER", "start BIGINT NOT NULL",
                     '"end" BIGINT NOT NULL', "graph_exec_id INTEGER NOT NULL",
                     "kernel_dispatch_count INTEGER NOT NULL DEFAULT 0", "event_id INTEGER",
                     _EXT],
}  # fmt: skip
_GRAPH = ["graph_exec_id INTEGER NOT NULL DEFAULT 0", "graph_node_id INTEGER NOT NULL DEFAULT 0"]

# the data views rocprofv3 creates that the rocpd tools read (data_views.sql), restated
DATA_VIEWS = {
    "regions": """SELECT R.id, R.guid, (SELECT string FROM rocpd_string RS WHERE RS.id =
        E.category_id AND RS.guid = E.guid) AS category, S.string AS name, R.nid, P.pid, T.tid,
        R.start, R."end", (R."end" - R.start) AS duration, R.event_id, E.stack_id,
        E.parent_stack_id, E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
        FROM rocpd_region R JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
        JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid
        JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid
        JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid""",
    "samples": """SELECT R.id, R.guid, (SELECT string FROM rocpd_string RS WHERE RS.id =
        E.category_id AND RS.guid = E.guid) AS category, (SELECT string FROM rocpd_string RS
        WHERE RS.id = T.name_id AND RS.guid = T.guid) AS name, T.nid, P.pid, TH.tid,
        R.timestamp, R.event_id, E.stack_id AS stack_id, E.parent_stack_id AS parent_stack_id,
        E.correlation_id AS corr_id, E.extdata AS extdata
        FROM rocpd_sample R JOIN rocpd_track T ON T.id = R.track_id AND T.guid = R.guid
        JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
        JOIN rocpd_info_process P ON P.id = T.pid AND P.guid = T.guid
        JOIN rocpd_info_thread TH ON TH.id = T.tid AND TH.guid = T.guid""",
    "kernels": """SELECT K.id, K.guid, T.tid, (SELECT string FROM rocpd_string RS WHERE RS.id =
        E.category_id AND RS.guid = E.guid) AS category, R.string AS region,
        S.display_name AS name, K.nid, P.pid, A.absolute_index AS agent_abs_index,
        A.logical_index AS agent_log_index, A.type_index AS agent_type_index,
        A.type AS agent_type, K.kernel_id, K.dispatch_id, K.stream_id, K.queue_id, K.start,
        K."end", (K."end" - K.start) AS duration, K.grid_size_x AS grid_x,
        K.grid_size_y AS grid_y, K.grid_size_z AS grid_z, K.workgroup_size_x AS workgroup_x,
        K.workgroup_size_y AS workgroup_y, K.workgroup_size_z AS workgroup_z,
        E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
        FROM rocpd_kernel_dispatch K
        JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid
        JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
        JOIN rocpd_string R ON R.id = K.region_name_id AND R.guid = K.guid
        JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
        LEFT JOIN rocpd_info_stream ST ON ST.id = K.stream_id AND ST.guid = K.guid
        LEFT JOIN rocpd_info_queue Q ON Q.id = K.queue_id AND Q.guid = K.guid
        JOIN rocpd_info_process P ON P.id = Q.pid AND P.guid = Q.guid
        JOIN rocpd_info_thread T ON T.id = K.tid AND T.guid = K.guid""",
}


def _graph_schema(schema: str) -> bool:
    parts = tuple(int(p) for p in schema.split("."))
    return parts >= (3, 0, 2)


def ddl(schema: str, uuid: str, guid: str, omit: frozenset[str] = frozenset()) -> list[str]:
    """CREATE statements of one table set (uuid-suffixed tables, their views, data views);
    ``omit``: tables (and their views) left out, as an older or trimmed writer would."""
    out = [
        f'CREATE TABLE "rocpd_metadata{uuid}" (id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, '
        "tag TEXT NOT NULL, value TEXT NOT NULL)",
        f'CREATE VIEW "rocpd_metadata" AS SELECT * FROM "rocpd_metadata{uuid}"',
    ]
    graph = _graph_schema(schema)
    for name, cols in COLUMNS.items():
        if name in omit or (name == "graph_launch" and not graph):
            continue
        body = [c.format(guid=guid) for c in _COMMON]
        for c in cols:
            body += (_GRAPH if graph else []) if c == "+graph" else [c.format()]
        out.append(f'CREATE TABLE "rocpd_{name}{uuid}" ({", ".join(body)})')
        out.append(f'CREATE VIEW "rocpd_{name}" AS SELECT * FROM "rocpd_{name}{uuid}"')
    for view, sql in DATA_VIEWS.items():
        out.append(f'CREATE VIEW "{view}" AS {sql}')
    return out


def write_rocpd(
    trace: Trace,
    path: Path,
    schema: str = "3",
    omit: frozenset[str] = frozenset(),
    wal: bool = False,
    range_op: str = RANGE_OP,
    hip_trace: bool = True,
) -> Path:
    """The database rocprofv3 writes for ``trace``. ``range_op``: the name a roctx range's
    region carries (the operation name of the marker kind's push/pop); ``hip_trace=False``: a
    run without HIP API tracing (kernel and graph records only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    u = _uuid.UUID(int=(0x0190_0000_0000_7000_8000_0000_0000_0000 | trace.pid))
    guid = str(u)
    uuid = "_" + guid.replace("-", "_")
    con = sqlite3.connect(path, isolation_level=None)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.execute("BEGIN")
    for stmt in ddl(schema, uuid, guid, omit):
        con.execute(stmt)

    def ins(table: str, **vals: object) -> int:
        cols = ", ".join(f'"{c}"' for c in vals)
        q = ", ".join("?" for _ in vals)
        cur = con.execute(f'INSERT INTO "rocpd_{table}{uuid}" ({cols}) VALUES ({q})',
                          tuple(vals.values()))  # fmt: skip
        return int(cur.lastrowid or 0)

    for tag, value in (("schema_version", schema), ("uuid", uuid), ("guid", guid)):
        con.execute(f'INSERT INTO "rocpd_metadata{uuid}" (tag, value) VALUES (?, ?)', (tag, value))
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = ins("string", string=s)
        return strings[s]

    sid("")  # generateRocpd.cpp adds the empty string first: region_name_id of unrenamed kernels
    nid = ins("info_node", hash=zlib.crc32(trace.host.encode()), machine_id=f"{trace.host}-id",
              hostname=trace.host, system_name="Linux")  # fmt: skip
    pid, tid = trace.pid, trace.tid
    ins("info_process", id=pid, nid=nid, ppid=1, pid=pid, init=trace.t0, fini=trace.t_end,
        start=trace.t0, end=trace.t_end, command="python3 -m vllm.entrypoints.openai.api_server",
        environment="{}", extdata="{}")  # fmt: skip
    if "info_thread" not in omit:
        ins("info_thread", id=tid, nid=nid, ppid=1, pid=pid, tid=tid)
    if "info_stream" not in omit:
        ins("info_stream", id=0, nid=nid, pid=pid, name="Default Stream")
    ins("info_queue", id=1, nid=nid, pid=pid, name="Queue 0")
    ins("info_agent", id=0, nid=nid, pid=pid, type="CPU", absolute_index=0, logical_index=0,
        type_index=0, name="AMD EPYC 9654")  # fmt: skip
    ins("info_agent", id=trace.agent, nid=nid, pid=pid, type="GPU", absolute_index=trace.agent,
        logical_index=trace.agent, type_index=trace.agent - 1, name=trace.arch,
        product_name=trace.product)  # fmt: skip
    ins("info_code_object", id=1, nid=nid, pid=pid, agent_id=trace.agent, uri="file:///model.co",
        storage_type="FILE")  # fmt: skip
    for name, kid in trace.symbols().items():
        ins("info_kernel_symbol", id=kid, nid=nid, pid=pid, code_object_id=1, kernel_name=name,
            display_name=name, arch_vgpr_count=64, sgpr_count=32)  # fmt: skip

    event_id = 0

    def event(category: str, corr: int, external: int = 0, extdata: str = "{}") -> int:
        nonlocal event_id
        event_id += 1
        return ins("event", id=event_id, category_id=sid(category), stack_id=corr,
                   parent_stack_id=corr, correlation_id=external, extdata=extdata)  # fmt: skip

    # API records first, then markers, then dispatches (generateRocpd.cpp's order)
    for a in trace.apis if hip_trace else []:
        ev = event(a.kind, a.corr)
        ins("region", id=a.corr, nid=nid, pid=pid, tid=tid, start=a.start, end=a.end,
            name_id=sid(a.name), event_id=ev)  # fmt: skip
    track = None
    for m in trace.markers:
        ext = json.dumps({"message": m.message})
        ev = event(RANGE_KIND, m.corr, extdata=ext)
        if not m.is_mark:
            ins("region", id=m.corr, nid=nid, pid=pid, tid=tid, start=m.start, end=m.end,
                name_id=sid(range_op), event_id=ev)  # fmt: skip
            continue
        if track is None:
            track = ins("track", nid=nid, pid=pid, tid=tid, name_id=sid(RANGE_KIND))
        ins("sample", id=m.corr, track_id=track, timestamp=m.start, event_id=ev)
    graph = _graph_schema(schema)
    for k in trace.kernels:
        ev = event(KERNEL_KIND, k.corr, k.external)
        extra = {"graph_exec_id": k.graph_exec, "graph_node_id": k.graph_node} if graph else {}
        ins("kernel_dispatch", id=k.dispatch_id, nid=nid, pid=pid, tid=tid, agent_id=trace.agent,
            kernel_id=k.kernel_id, dispatch_id=k.dispatch_id, queue_id=1, stream_id=0,
            start=k.start, end=k.end, private_segment_size=0, group_segment_size=0,
            workgroup_size_x=k.block[0], workgroup_size_y=k.block[1],
            workgroup_size_z=k.block[2], grid_size_x=k.grid[0], grid_size_y=k.grid[1],
            grid_size_z=k.grid[2], region_name_id=sid(""), event_id=ev, **extra)  # fmt: skip
    if graph:
        for g in trace.launches:
            ev = event("HIP_GRAPH", g.corr)
            ins("graph_launch", nid=nid, pid=pid, tid=tid, agent_id=trace.agent, queue_id=1,
                start=g.start, end=g.end, graph_exec_id=g.exec_id,
                kernel_dispatch_count=g.kernels, event_id=ev)  # fmt: skip
    con.execute("COMMIT")
    con.close()
    return path

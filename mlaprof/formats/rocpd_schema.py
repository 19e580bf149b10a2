"""The rocpd SQLite schema (version 3.0.1, as written by rocprofv3 in ROCm 7.0/7.1), written from
the public table and view definitions (rocprofiler-sdk ``source/share/rocprofiler-sdk-rocpd/``
``rocpd_tables.sql``, ``rocpd_views.sql``, ``data_views.sql``): physical tables
``rocpd_<name><uuid>``, unsuffixed views over them, and the data views the rocpd tools query
(``kernels``, ``regions``, ``samples``, ``top_kernels``, ``memory_copies``,
``memory_allocations``; each exposes its event's ``stack_id``, the correlation rocpd's
converters write as ``Correlation_Id``).

Only the schema's own tables are created (strict validators reject unknown tables); mlaprof's
extra data goes into the ``extdata`` JSON columns.
"""

from __future__ import annotations

SCHEMA_VERSION = "3.0.1"

# mlaprof's use of the schema, shared by its exporter and its importer:
LAYER_CATEGORY = "MLAPROF_LAYER"
KERNEL_CATEGORY = "KERNEL_DISPATCH"
# a roctx range's region name: the push/pop operation of rocprofv3's marker kind
# (rocprofiler-sdk source/lib/rocprofiler-sdk/marker/range_marker.def.cpp)
RANGE_OP = "roctxThreadRangeA"
# analysis tables an export carries: one JSON row each, a rocpd_arg row (type PAYLOAD_ARG, name
# the table) of one event of category PAYLOAD_CATEGORY; exports before carried them whole in the
# process row's extdata, which the importer still reads. The import's trace checks too: the
# export's kernels are stored as they are (never annotated again), so without its checks a
# rank's lost dispatches would read as a trust nobody can judge
PAYLOAD_CATEGORY = "MLAPROF_PAYLOAD"
PAYLOAD_ARG = "mlaprof-row"
PAYLOAD_TABLES = (
    "steps",
    "layers",
    "syncs",
    "splits",
    "padding",
    "memory",
    "captures",
    "counters",
    "events",
    "trace_checks",
)

_FK_NODE = "FOREIGN KEY (nid) REFERENCES `rocpd_info_node{u}` (id) ON UPDATE CASCADE"
_FK_PROC = "FOREIGN KEY (pid) REFERENCES `rocpd_info_process{u}` (id) ON UPDATE CASCADE"

# table -> column definitions (without id/guid, which every table but metadata starts with)
TABLES: dict[str, list[str]] = {
    "string": ['"string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT'],
    "info_node": [
        '"hash" BIGINT NOT NULL UNIQUE',
        '"machine_id" TEXT NOT NULL UNIQUE',
        '"system_name" TEXT',
        '"hostname" TEXT',
        '"release" TEXT',
        '"version" TEXT',
        '"hardware_name" TEXT',
        '"domain_name" TEXT',
    ],
    "info_process": [
        '"nid" INTEGER NOT NULL',
        '"ppid" INTEGER',
        '"pid" INTEGER NOT NULL',
        '"init" BIGINT',
        '"fini" BIGINT',
        '"start" BIGINT',
        '"end" BIGINT',
        '"command" TEXT',
        '"environment" JSONB DEFAULT "{{}}" NOT NULL',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
    ],
    "info_thread": [
        '"nid" INTEGER NOT NULL',
        '"ppid" INTEGER',
        '"pid" INTEGER NOT NULL',
        '"tid" INTEGER NOT NULL',
        '"name" TEXT',
        '"start" BIGINT',
        '"end" BIGINT',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_agent": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        "\"type\" TEXT CHECK (\"type\" IN ('CPU', 'GPU', 'NIC'))",
        '"absolute_index" INTEGER',
        '"logical_index" INTEGER',
        '"type_index" INTEGER',
        '"uuid" INTEGER',
        '"name" TEXT',
        '"model_name" TEXT',
        '"vendor_name" TEXT',
        '"product_name" TEXT',
        '"user_name" TEXT',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_queue": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"name" TEXT',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_stream": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"name" TEXT',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_pmc": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"agent_id" INTEGER',
        "\"target_arch\" TEXT CHECK (\"target_arch\" IN ('CPU', 'GPU', 'NIC'))",
        '"event_code" INT',
        '"instance_id" INTEGER',
        '"name" TEXT NOT NULL',
        '"symbol" TEXT NOT NULL',
        '"description" TEXT',
        '"long_description" TEXT DEFAULT ""',
        '"component" TEXT',
        '"units" TEXT DEFAULT ""',
        "\"value_type\" TEXT CHECK (\"value_type\" IN ('ABS', 'ACCUM', 'RELATIVE'))",
        '"block" TEXT',
        '"expression" TEXT',
        '"is_constant" INTEGER',
        '"is_derived" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_code_object": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"agent_id" INTEGER',
        '"uri" TEXT',
        '"load_base" BIGINT',
        '"load_size" BIGINT',
        '"load_delta" BIGINT',
        "\"storage_type\" TEXT CHECK (\"storage_type\" IN ('FILE', 'MEMORY'))",
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "info_kernel_symbol": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"code_object_id" INTEGER NOT NULL',
        '"kernel_name" TEXT',
        '"display_name" TEXT',
        '"kernel_object" INTEGER',
        '"kernarg_segment_size" INTEGER',
        '"kernarg_segment_alignment" INTEGER',
        '"group_segment_size" INTEGER',
        '"private_segment_size" INTEGER',
        '"sgpr_count" INTEGER',
        '"arch_vgpr_count" INTEGER',
        '"accum_vgpr_count" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "track": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER',
        '"tid" INTEGER',
        '"name_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
    ],
    "event": [
        '"category_id" INTEGER',
        '"stack_id" INTEGER',
        '"parent_stack_id" INTEGER',
        '"correlation_id" INTEGER',
        '"call_stack" JSONB DEFAULT "{{}}" NOT NULL',
        '"line_info" JSONB DEFAULT "{{}}" NOT NULL',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
    ],
    "arg": [
        '"event_id" INTEGER NOT NULL',
        '"position" INTEGER NOT NULL',
        '"type" TEXT NOT NULL',
        '"name" TEXT NOT NULL',
        '"value" TEXT',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
    ],
    "pmc_event": [
        '"event_id" INTEGER',
        '"pmc_id" INTEGER NOT NULL',
        '"value" REAL DEFAULT 0.0',
        '"extdata" JSONB DEFAULT "{{}}"',
    ],
    "region": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"tid" INTEGER NOT NULL',
        '"start" BIGINT NOT NULL',
        '"end" BIGINT NOT NULL',
        '"name_id" INTEGER NOT NULL',
        '"event_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "sample": [
        '"track_id" INTEGER NOT NULL',
        '"timestamp" BIGINT NOT NULL',
        '"event_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
    ],
    "kernel_dispatch": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"tid" INTEGER',
        '"agent_id" INTEGER NOT NULL',
        '"kernel_id" INTEGER NOT NULL',
        '"dispatch_id" INTEGER NOT NULL',
        '"queue_id" INTEGER NOT NULL',
        '"stream_id" INTEGER NOT NULL',
        '"start" BIGINT NOT NULL',
        '"end" BIGINT NOT NULL',
        '"private_segment_size" INTEGER',
        '"group_segment_size" INTEGER',
        '"workgroup_size_x" INTEGER NOT NULL',
        '"workgroup_size_y" INTEGER NOT NULL',
        '"workgroup_size_z" INTEGER NOT NULL',
        '"grid_size_x" INTEGER NOT NULL',
        '"grid_size_y" INTEGER NOT NULL',
        '"grid_size_z" INTEGER NOT NULL',
        '"region_name_id" INTEGER',
        '"event_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "memory_copy": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"tid" INTEGER',
        '"start" BIGINT NOT NULL',
        '"end" BIGINT NOT NULL',
        '"name_id" INTEGER NOT NULL',
        '"dst_agent_id" INTEGER',
        '"dst_address" INTEGER',
        '"src_agent_id" INTEGER',
        '"src_address" INTEGER',
        '"size" INTEGER NOT NULL',
        '"queue_id" INTEGER',
        '"stream_id" INTEGER',
        '"region_name_id" INTEGER',
        '"event_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
    "memory_allocate": [
        '"nid" INTEGER NOT NULL',
        '"pid" INTEGER NOT NULL',
        '"tid" INTEGER',
        '"agent_id" INTEGER',
        "\"type\" TEXT CHECK (\"type\" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM'))",
        "\"level\" TEXT CHECK (\"level\" IN ('REAL', 'VIRTUAL', 'SCRATCH'))",
        '"start" BIGINT NOT NULL',
        '"end" BIGINT NOT NULL',
        '"address" INTEGER',
        '"size" INTEGER NOT NULL',
        '"queue_id" INTEGER',
        '"stream_id" INTEGER',
        '"event_id" INTEGER',
        '"extdata" JSONB DEFAULT "{{}}" NOT NULL',
        _FK_NODE,
        _FK_PROC,
    ],
}


def table_ddl(uuid: str, guid: str) -> list[str]:
    """CREATE TABLE statements for the physical (uuid-suffixed) tables and their views."""
    out = [
        f'CREATE TABLE "rocpd_metadata{uuid}" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, '
        '"tag" TEXT NOT NULL, "value" TEXT NOT NULL)',
        f'CREATE VIEW "rocpd_metadata" AS SELECT * FROM "rocpd_metadata{uuid}"',
    ]
    for name, cols in TABLES.items():
        body = [
            '"id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT',
            f'"guid" TEXT DEFAULT "{guid}" NOT NULL',
        ] + [c.format(u=uuid) for c in cols]
        out.append(f'CREATE TABLE "rocpd_{name}{uuid}" ({", ".join(body)})')
        out.append(f'CREATE VIEW "rocpd_{name}" AS SELECT * FROM "rocpd_{name}{uuid}"')
    return out


# Data views (the columns the rocpd tools read), over the unsuffixed views.
DATA_VIEWS = [
    """CREATE VIEW "regions" AS SELECT R.id, R.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        S.string AS name, R.nid, P.pid, T.tid, R.start, R.end, (R.end - R.start) AS duration,
        R.event_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id, E.extdata,
        E.call_stack, E.line_info
    FROM rocpd_region R
        JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
        JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid
        JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid
        JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid""",
    """CREATE VIEW "samples" AS SELECT R.id, R.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        (SELECT string FROM rocpd_string RS WHERE RS.id = T.name_id AND RS.guid = T.guid)
            AS name,
        T.nid, P.pid, TH.tid, R.timestamp, R.event_id, E.stack_id, E.parent_stack_id,
        E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
    FROM rocpd_sample R
        JOIN rocpd_track T ON T.id = R.track_id AND T.guid = R.guid
        JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
        JOIN rocpd_info_process P ON P.id = T.pid AND P.guid = T.guid
        JOIN rocpd_info_thread TH ON TH.id = T.tid AND TH.guid = T.guid""",
    """CREATE VIEW "kernels" AS SELECT K.id, K.guid, T.tid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        R.string AS region, S.display_name AS name, K.nid, P.pid,
        A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
        A.type_index AS agent_type_index, A.type AS agent_type,
        S.code_object_id AS code_object_id, K.kernel_id, K.dispatch_id, K.stream_id, K.queue_id,
        Q.name AS queue, ST.name AS stream, K.start, K.end, (K.end - K.start) AS duration,
        K.grid_size_x AS grid_x, K.grid_size_y AS grid_y, K.grid_size_z AS grid_z,
        K.workgroup_size_x AS workgroup_x, K.workgroup_size_y AS workgroup_y,
        K.workgroup_size_z AS workgroup_z, K.group_segment_size AS lds_size,
        K.private_segment_size AS scratch_size, S.arch_vgpr_count AS vgpr_count,
        S.accum_vgpr_count, S.sgpr_count, S.group_segment_size AS static_lds_size,
        S.private_segment_size AS static_scratch_size, K.event_id, E.stack_id,
        E.parent_stack_id, E.correlation_id AS corr_id
    FROM rocpd_kernel_dispatch K
        JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid
        JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
        JOIN rocpd_string R ON R.id = K.region_name_id AND R.guid = K.guid
        JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
        LEFT JOIN rocpd_info_stream ST ON ST.id = K.stream_id AND ST.guid = K.guid
        LEFT JOIN rocpd_info_queue Q ON Q.id = K.queue_id AND Q.guid = K.guid
        JOIN rocpd_info_process P ON P.id = Q.pid AND P.guid = Q.guid
        JOIN rocpd_info_thread T ON T.id = K.tid AND T.guid = K.guid""",
    """CREATE VIEW "top_kernels" AS SELECT S.display_name AS name,
        COUNT(K.kernel_id) AS total_calls, SUM(K.end - K.start) / 1000.0 AS total_duration,
        (SUM(K.end - K.start) / COUNT(K.kernel_id)) / 1000.0 AS average,
        SUM(K.end - K.start) * 100.0 / (SELECT SUM(A.end - A.start) FROM rocpd_kernel_dispatch A)
            AS percentage
    FROM rocpd_kernel_dispatch K
        JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
    GROUP BY name ORDER BY total_duration DESC""",
    """CREATE VIEW "memory_copies" AS SELECT M.id, M.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, S.string AS name,
        M.stream_id, M.queue_id, M.size, DA.name AS dst_device,
        DA.absolute_index AS dst_agent_abs_index, M.dst_address, SA.name AS src_device,
        SA.absolute_index AS src_agent_abs_index, M.src_address, E.stack_id, E.parent_stack_id,
        E.correlation_id AS corr_id
    FROM rocpd_memory_copy M
        JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid
        JOIN rocpd_info_agent DA ON DA.id = M.dst_agent_id AND DA.guid = M.guid
        JOIN rocpd_info_agent SA ON SA.id = M.src_agent_id AND SA.guid = M.guid
        JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid
        JOIN rocpd_info_process P ON P.id = M.pid AND P.guid = M.guid
        JOIN rocpd_info_thread T ON T.id = M.tid AND T.guid = M.guid""",
    """CREATE VIEW "memory_allocations" AS SELECT M.id, M.guid,
        (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid)
            AS category,
        M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, M.type, M.level,
        A.name AS agent_name, A.absolute_index AS agent_abs_index, M.address, M.size,
        M.queue_id, M.stream_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
    FROM rocpd_memory_allocate M
        LEFT JOIN rocpd_info_agent A ON M.agent_id = A.id AND M.guid = A.guid
        JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid
        JOIN rocpd_info_process P ON P.id = M.pid AND P.guid = M.guid
        JOIN rocpd_info_thread T ON T.id = M.tid AND T.guid = M.guid""",
]

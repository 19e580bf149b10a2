"""The run store's schema: one place that names every table and column.

A run is a folder: ``run.json`` (metadata) plus one SQLite database per rank (``rank<N>.db``).
Every table carries ``rank``. Times are integer nanoseconds, sizes integer bytes.
Bump ``SCHEMA_VERSION`` on any incompatible change; readers refuse versions they do not know.
Version 2 added columnar side tables (imported kernels in Arrow files, :mod:`.columnar`); a
version-1 run simply has none, so both are read. Version 3 added ``trace_checks`` (an import's
checks per rank, :mod:`.trace_checks`); an older database lacks the table, and the reader serves
it from the checks that run's ``run.json`` kept (migrated on read, never written back).
"""

from __future__ import annotations

import functools
from typing import Any

SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


def version_problem(version: object, what: object) -> str | None:
    """The one-line complaint about ``what`` having schema ``version``, or None if readable."""
    if version in READABLE_VERSIONS:
        return None
    return (
        f"{what} has schema version {version!r}; this mlaprof reads versions "
        f"{', '.join(map(str, READABLE_VERSIONS))}"
    )


# table -> ((column, sqlite type), ...). "rank" is added to every table by the writer.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    # one row per engine step (one verify forward over all layers)
    "steps": (
        ("step", "INTEGER"),
        ("t_start_ns", "INTEGER"),
        ("duration_ns", "INTEGER"),
        ("num_reqs", "INTEGER"),  # requests in the (padded) batch
        ("num_real_reqs", "INTEGER"),
        ("qlen", "INTEGER"),
        ("real_tokens", "INTEGER"),
        ("padded_tokens", "INTEGER"),  # the capture size the batch was padded to
        ("graph_mode", "TEXT"),  # FULL, PIECEWISE, NONE (eager)
        ("backend", "TEXT"),
        ("timing", "TEXT"),  # how duration_ns was measured: cpu-thread, cpu-wall, graph-replay, ...
    ),
    # one row per layer per step
    "layers": (
        ("step", "INTEGER"),
        ("layer", "INTEGER"),
        ("t_start_ns", "INTEGER"),
        ("duration_ns", "INTEGER"),
        ("syncs", "INTEGER"),  # device->host syncs seen inside the layer's region
        ("splits_used", "INTEGER"),
        ("splits_deserved", "INTEGER"),
    ),
    # one row per sync / data-dependent allocation found inside a watched region
    "syncs": (
        ("step", "INTEGER"),
        ("layer", "INTEGER"),
        ("kind", "TEXT"),  # sync | alloc | capture-error
        ("op", "TEXT"),  # aten op or python call, e.g. aten._local_scalar_dense, Tensor.tolist
        ("location", "TEXT"),  # file:line of the caller in user code
        ("function", "TEXT"),
        ("detail", "TEXT"),
    ),
    # KV-split count per policy per step: used (as the run's metadata gives it) vs deserved
    "splits": (
        ("step", "INTEGER"),
        ("capture_size", "INTEGER"),
        ("policy", "TEXT"),
        ("used", "INTEGER"),
        ("deserved", "INTEGER"),
        ("frozen", "INTEGER"),  # S a FULL graph captured with the dummy run would replay with
        ("all_rows", "INTEGER"),  # S with min_kv_seq_len over all rows (padding pinned: the bug)
        ("active_rows", "INTEGER"),  # S with min_kv_seq_len over rows with qo_len > 0 (the fix)
        ("min_kv_used", "INTEGER"),
        ("min_kv_deserved", "INTEGER"),
        ("occupancy_used", "REAL"),  # fraction of the device's CUs/SMs busy with real work
        ("occupancy_deserved", "REAL"),
        ("target", "TEXT"),  # device preset the occupancy is computed for
        ("note", "TEXT"),
    ),
    # FULL-graph padding per step
    "padding": (
        ("step", "INTEGER"),
        ("capture_size", "INTEGER"),
        ("real_rows", "INTEGER"),  # real requests
        ("padding_rows", "INTEGER"),  # padding requests (qo_len 0)
        ("real_tokens", "INTEGER"),
        ("padding_tokens", "INTEGER"),
        ("kv_bytes_real", "INTEGER"),  # KV bytes the real rows must read per layer
        ("kv_bytes_padding", "INTEGER"),  # KV bytes padding rows make a kernel read per layer
    ),
    # capture attempts and their memory, per capture size
    "memory": (
        ("capture_size", "INTEGER"),
        ("graph_mode", "TEXT"),
        ("pool_bytes", "INTEGER"),  # private memory pool reserved by the graph
        ("allocator_bytes", "INTEGER"),  # caching-allocator reserved-bytes delta
        ("driver_bytes", "INTEGER"),  # driver free-memory delta (what vLLM logs)
        ("capture_ns", "INTEGER"),
    ),
    # capture outcome (one row per attempt)
    "captures": (
        ("capture_size", "INTEGER"),
        ("graph_mode", "TEXT"),  # requested mode
        ("status", "TEXT"),  # captured | failed | not-attempted | predicted-fail
        ("fallback", "TEXT"),  # mode used instead when it failed
        ("op", "TEXT"),
        ("layer", "INTEGER"),
        ("location", "TEXT"),
        ("message", "TEXT"),
    ),
    # GPU kernels (from profilers, importers or mlaprof's own launches)
    "kernels": (
        ("step", "INTEGER"),
        ("layer", "INTEGER"),
        ("replay", "INTEGER"),  # graph replay / launch group the kernel belongs to
        ("name", "TEXT"),
        ("start_ns", "INTEGER"),
        ("end_ns", "INTEGER"),
        ("device", "INTEGER"),
        ("stream", "INTEGER"),
        ("correlation", "INTEGER"),
        ("grid_x", "INTEGER"),
        ("grid_y", "INTEGER"),
        ("grid_z", "INTEGER"),
        ("block_x", "INTEGER"),
        ("block_y", "INTEGER"),
        ("block_z", "INTEGER"),
        ("splits", "INTEGER"),  # KV-split count, from metadata or inferred from the grid
        ("graph_id", "INTEGER"),
        ("graph_node_id", "INTEGER"),
    ),
    # host API calls and markers (imported traces, roctx/NVTX ranges)
    "api": (
        ("domain", "TEXT"),
        ("function", "TEXT"),
        ("pid", "INTEGER"),
        ("tid", "INTEGER"),
        ("correlation", "INTEGER"),
        ("start_ns", "INTEGER"),
        ("end_ns", "INTEGER"),
    ),
    # memory copies and allocations from imported traces
    "transfers": (
        ("kind", "TEXT"),  # MEMORY_COPY | MEMORY_ALLOCATION
        ("operation", "TEXT"),  # direction or allocate/free
        ("src_agent", "TEXT"),
        ("dst_agent", "TEXT"),
        ("size_bytes", "INTEGER"),
        ("address", "TEXT"),
        ("correlation", "INTEGER"),
        ("start_ns", "INTEGER"),
        ("end_ns", "INTEGER"),
    ),
    # counters and statistics (rocprof counter collection, *_stats.csv, vLLM log values)
    "counters": (
        ("source", "TEXT"),
        ("name", "TEXT"),
        ("key", "TEXT"),  # what the value is about (kernel name, dispatch id, ...)
        ("value", "REAL"),
        ("t_ns", "INTEGER"),
    ),
    # free-form events: engine decisions (cudagraph mode downgrades), log lines, notes
    "events": (
        ("t_ns", "INTEGER"),
        ("source", "TEXT"),
        ("kind", "TEXT"),
        ("message", "TEXT"),
        ("data", "TEXT"),  # JSON
    ),
    # an import's checks of what it took apart, one item of one check per row, per rank
    # (mlaprof.store.trace_checks): never a sum over ranks
    "trace_checks": (
        ("check_name", "TEXT"),  # the check: launches, replays, stage2, steps, qlen, heads, ...
        ("item", "TEXT"),  # what it counted (NULL: the check's whole value is in detail)
        ("count", "INTEGER"),  # how many (NULL where the item is not a count)
        ("detail", "TEXT"),  # JSON of an item that is not a count (a text, a list, a record)
    ),
}


def lacking_tables(con: Any) -> frozenset[str]:
    """The store tables a rank database (a ``sqlite3`` connection) lacks: written by a version
    before they existed (``trace_checks`` before version 3)."""
    have = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return frozenset(t for t in TABLES if t not in have)


@functools.cache
def columns(table: str) -> tuple[str, ...]:
    """Column names of ``table`` including ``rank`` (first)."""
    return ("rank",) + tuple(name for name, _ in TABLES[table])

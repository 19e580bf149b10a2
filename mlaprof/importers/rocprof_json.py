"""rocprofv3 JSON importer (``-f json``): ``{"rocprofiler-sdk-tool": [per-process objects]}``.

Each process object holds ``kernel_symbols`` (names by ``kernel_id``), ``strings`` and
``buffer_records`` with ``kernel_dispatch`` (``dispatch_info``: agent, queue, kernel id, grid and
workgroup sizes), ``hip_api`` / ``hsa_api`` / ``marker_api`` / ``rccl_api``, ``memory_copy`` and
``memory_allocation`` records. Timestamps are integer ns.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.importers.annotate import KernelColumns
from mlaprof.importers.common import ImportSummary, parse_json, to_int
from mlaprof.importers.rocprof_csv import _TRANSFER_COLS, KERNEL_COLS

if TYPE_CHECKING:
    from mlaprof.store.staging import BulkWriter

TOP_KEY = "rocprofiler-sdk-tool"
_API_KINDS = ("hip_api", "hsa_api", "marker_api", "rccl_api", "rocdecode_api", "rocjpeg_api")


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise MlaprofError(f"{where}: expected an object, found {type(v).__name__}")
    return v


def _handle(v: Any) -> int | None:
    """rocprofv3 writes ids either as numbers or as ``{"handle": N}``."""
    if isinstance(v, Mapping):
        v = v.get("handle")
    return to_int(v, "id")


def _corr(v: Any) -> int | None:
    if isinstance(v, Mapping):
        v = v.get("internal")
    return to_int(v, "correlation id")


def _list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise MlaprofError(f"{where}: expected a list, found {type(v).__name__}")
    return v


def _agent(v: Any) -> str | None:
    h = _handle(v)
    return None if h is None else str(h)


def _req(rec: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in rec:
        raise MlaprofError(f"{where}: record without {key!r}")
    return rec[key]


def _symbols(proc: Mapping[str, Any], where: str) -> dict[int, str]:
    syms = proc.get("kernel_symbols", [])
    items = syms.values() if isinstance(syms, Mapping) else syms
    if not isinstance(items, (list, tuple)) and not isinstance(syms, Mapping):
        raise MlaprofError(f"{where}: kernel_symbols is not a list")
    out: dict[int, str] = {}
    for s in items:
        s = _obj(s, f"{where} kernel_symbols")
        kid = to_int(_req(s, "kernel_id", f"{where} kernel_symbols"), "kernel_id")
        name = (
            s.get("formatted_kernel_name")
            or s.get("demangled_kernel_name")
            or s.get("kernel_name")
            or s.get("truncated_kernel_name")
        )
        if kid is not None:
            out[kid] = str(name) if name is not None else f"kernel_{kid}"
    return out


def _op_name(proc: Mapping[str, Any], kind: str, rec: Mapping[str, Any]) -> tuple[str, str]:
    """(domain, function) of an API record; operations are names or indices into ``strings``."""
    op = rec.get("operation")
    domain = str(rec.get("kind", kind.upper()))
    if isinstance(op, str):
        return domain, op
    strings = proc.get("strings", {})
    table = strings.get("buffer_records") if isinstance(strings, Mapping) else None
    if isinstance(table, list):
        for entry in table:
            if not isinstance(entry, Mapping):
                continue
            if entry.get("kind") == rec.get("kind") or str(entry.get("kind")).lower() == kind:
                ops = entry.get("operations")
                if isinstance(ops, list) and isinstance(op, int) and 0 <= op < len(ops):
                    return str(entry.get("kind", domain)), str(ops[op])
    if kind == "marker_api" and "message" in rec:
        return domain, str(rec["message"])
    return domain, str(op)


def import_json(
    path: Path, text: str, bulk: BulkWriter, summary: ImportSummary
) -> KernelColumns | None:
    """Store the API and memory records; return the kernels (stored after annotation)."""
    doc = parse_json(path, text)
    if not isinstance(doc, Mapping) or TOP_KEY not in doc:
        raise MlaprofError(f"{path}: not a rocprofv3 JSON file (no {TOP_KEY!r} key)")
    procs = doc[TOP_KEY]
    if isinstance(procs, Mapping):
        procs = [procs]
    if not isinstance(procs, list):
        raise MlaprofError(f"{path}: {TOP_KEY!r} is not a list of processes")
    kflat: list[Any] = []
    for pi, proc in enumerate(procs):
        where = f"{path} process {pi}"
        proc = _obj(proc, where)
        syms = _symbols(proc, where)
        recs = _obj(proc.get("buffer_records", {}), f"{where} buffer_records")
        meta = proc.get("metadata", {})
        pid = to_int(meta.get("pid"), "pid") if isinstance(meta, Mapping) else None
        for rec in _list(recs.get("kernel_dispatch", []), f"{where} kernel_dispatch"):
            rec = _obj(rec, f"{where} kernel_dispatch")
            di = _obj(_req(rec, "dispatch_info", f"{where} kernel_dispatch"), f"{where} dispatch")
            kid = to_int(_req(di, "kernel_id", f"{where} dispatch_info"), "kernel_id")
            grid = _obj(_req(di, "grid_size", f"{where} dispatch_info"), f"{where} grid_size")
            wg = _obj(_req(di, "workgroup_size", f"{where} dispatch_info"), f"{where} wg")
            kflat += [
                syms.get(kid, f"kernel_{kid}"),
                to_int(_req(rec, "start_timestamp", where), "start_timestamp"),
                to_int(_req(rec, "end_timestamp", where), "end_timestamp"),
                _handle(di.get("agent_id")),
                _handle(rec.get("stream_id", di.get("stream_id"))),
                _corr(rec.get("correlation_id")),
                to_int(grid.get("x"), "grid x"),
                to_int(grid.get("y"), "grid y"),
                to_int(grid.get("z"), "grid z"),
                to_int(wg.get("x"), "workgroup x"),
                to_int(wg.get("y"), "workgroup y"),
                to_int(wg.get("z"), "workgroup z"),
                to_int(rec.get("graph_exec_id", di.get("graph_exec_id")), "graph id"),
                to_int(rec.get("graph_node_id", di.get("graph_node_id")), "graph node id"),
            ]
        api: list[list[Any]] = []
        for kind in _API_KINDS:
            for rec in _list(recs.get(kind, []), f"{where} {kind}"):
                rec = _obj(rec, f"{where} {kind}")
                domain, fn = _op_name(proc, kind, rec)
                api.append(
                    [
                        domain,
                        fn,
                        pid,
                        to_int(rec.get("thread_id"), "thread_id"),
                        _corr(rec.get("correlation_id")),
                        to_int(_req(rec, "start_timestamp", where), "start_timestamp"),
                        to_int(_req(rec, "end_timestamp", where), "end_timestamp"),
                    ]
                )
        cols = ("domain", "function", "pid", "tid", "correlation", "start_ns", "end_ns")
        summary.add("api", bulk.insert("api", cols, api))
        xfer: list[list[Any]] = []
        for rec in _list(recs.get("memory_copy", []), f"{where} memory_copy"):
            rec = _obj(rec, f"{where} memory_copy")
            _, op = _op_name(proc, "memory_copy", rec)
            xfer.append(
                [
                    "MEMORY_COPY",
                    op,
                    _agent(rec.get("src_agent_id")),
                    _agent(rec.get("dst_agent_id")),
                    to_int(rec.get("bytes"), "bytes"),
                    None,
                    _corr(rec.get("correlation_id")),
                    to_int(_req(rec, "start_timestamp", where), "start_timestamp"),
                    to_int(_req(rec, "end_timestamp", where), "end_timestamp"),
                ]
            )
        for rec in _list(recs.get("memory_allocation", []), f"{where} memory_allocation"):
            rec = _obj(rec, f"{where} memory_allocation")
            _, op = _op_name(proc, "memory_allocation", rec)
            addr = rec.get("address")
            xfer.append(
                [
                    "MEMORY_ALLOCATION",
                    op,
                    None,
                    _agent(rec.get("agent_id")),
                    to_int(rec.get("allocation_size"), "allocation_size"),
                    None if addr is None else str(_handle(addr)),
                    _corr(rec.get("correlation_id")),
                    to_int(_req(rec, "start_timestamp", where), "start_timestamp"),
                    to_int(_req(rec, "end_timestamp", where), "end_timestamp"),
                ]
            )
        summary.add("transfers", bulk.insert("transfers", _TRANSFER_COLS, xfer))
    summary.files.append(str(path))
    return KernelColumns.from_rows(KERNEL_COLS, kflat) if kflat else None

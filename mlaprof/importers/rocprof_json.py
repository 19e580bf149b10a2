"""rocprofv3 JSON importer (``-f json``): ``{"rocprofiler-sdk-tool": [per-process objects]}``.

Each process object holds ``kernel_symbols`` (names by ``kernel_id``), ``strings`` and
``buffer_records`` with ``kernel_dispatch`` (``dispatch_info``: agent, queue, kernel id, grid and
workgroup sizes), ``hip_api`` / ``hsa_api`` / ``marker_api`` / ``rccl_api``, ``memory_copy`` and
``memory_allocation`` records, and ``callback_records.counter_collection`` (``--pmc``: each
dispatch's ``dispatch_data`` and its ``records``, one value per counter instance, the counters
named in the process's ``counters`` list by id; ``source/lib/output/counter_info.hpp``
``tool_counter_record_t::save``). Timestamps are integer ns. Records name their kind and operation
by integer codes into ``strings.buffer_records`` and their roctx messages by correlation id into
``strings.marker_api`` (rocprofiler-sdk ``source/lib/output/generateJSON.cpp``,
``source/docs/rocprofv3-schema.json``); ``correlation_id`` is ``{internal, external}``, the
internal id tying a kernel to its launching call.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlaprof.errors import MlaprofError
from mlaprof.importers.annotate import KernelColumns
from mlaprof.importers.common import (
    GpuAgent,
    ImportSummary,
    gpu_agent,
    parse_json,
    to_float,
    to_int,
)
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


def _agent_nodes(proc: Mapping[str, Any]) -> dict[int, int]:
    """Agent handle -> node id (``agents[].id.handle``, ``agents[].node_id``: rocprofiler-sdk
    ``include/rocprofiler-sdk/cxx/serialization/save.hpp``): the GPU number the rocpd output
    gives as ``absolute_index``, where records only carry the opaque handle."""
    out: dict[int, int] = {}
    for a in proc.get("agents") or []:
        if isinstance(a, Mapping):
            h, node = _handle(a.get("id")), a.get("node_id")
            if h is not None and isinstance(node, int) and not isinstance(node, bool):
                out[h] = node
    return out


def gpu_agents(proc: Mapping[str, Any]) -> list[GpuAgent]:
    """The process's GPU agents (``agents[]``: ``type`` 2 is ROCPROFILER_AGENT_TYPE_GPU, with
    ``name``, ``product_name``, ``model_name``, ``node_id``: rocprofiler-sdk
    ``cxx/serialization.hpp`` ``save(rocprofiler_agent_v0_t)``), by the node id its kernel
    records are read with (:func:`_agent_nodes`)."""
    out = []
    for a in proc.get("agents") or []:
        if isinstance(a, Mapping) and a.get("type") == 2:
            node = a.get("node_id")
            node = node if isinstance(node, int) and not isinstance(node, bool) else None
            out.append(gpu_agent([node], a.get("name"), a.get("product_name"), a.get("model_name")))
    return out


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


def _kind_names(proc: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """``strings.buffer_records``: per kind code (the list index) its name and operation names
    (rocprofiler-sdk ``source/lib/output/generateJSON.cpp``; records carry the codes)."""
    strings = proc.get("strings", {})
    table = strings.get("buffer_records") if isinstance(strings, Mapping) else None
    out: list[tuple[str, list[Any]]] = []
    for entry in table if isinstance(table, list) else []:
        if isinstance(entry, Mapping):
            ops = entry.get("operations")
            out.append((str(entry.get("kind", "")), ops if isinstance(ops, list) else []))
        else:
            out.append(("", []))
    return out


def _marker_messages(proc: Mapping[str, Any]) -> dict[int, str]:
    """``strings.marker_api``: roctx messages by the internal correlation id of their push or
    mark, written as ``[{"key": id, "value": message}]``."""
    strings = proc.get("strings", {})
    raw = strings.get("marker_api") if isinstance(strings, Mapping) else None
    items = raw.items() if isinstance(raw, Mapping) else (
        (e.get("key"), e.get("value")) for e in raw or [] if isinstance(e, Mapping)
    )  # fmt: skip
    out: dict[int, str] = {}
    for k, v in items:
        try:
            key = int(k)
        except (TypeError, ValueError):
            continue
        if isinstance(v, str):
            out[key] = v
    return out


_MARKER_OPS = ("roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxRangePushA",
               "roctxRangeStartA")  # fmt: skip


def _op_name(
    kinds: list[tuple[str, list[Any]]],
    messages: dict[int, str],
    section: str,
    rec: Mapping[str, Any],
) -> tuple[str, str]:
    """(domain, function) of a record: integer ``kind`` and ``operation`` codes resolved through
    the string tables (names are taken as they are); a roctx range or mark's function is its
    message, by the record's internal correlation id."""
    kind, op = rec.get("kind"), rec.get("operation")
    ops: list[Any] = []
    if isinstance(kind, int) and not isinstance(kind, bool) and 0 <= kind < len(kinds):
        domain, ops = kinds[kind]
    elif isinstance(kind, str):
        domain = kind
        ops = next((o for k, o in kinds if k == kind), [])
    else:
        domain = section.upper()
    if isinstance(op, str):
        fn = op
    elif isinstance(op, int) and not isinstance(op, bool) and 0 <= op < len(ops):
        fn = str(ops[op])
    else:
        fn = str(op)
    if "MARKER" in domain.upper() or section == "marker_api":
        corr = _corr(rec.get("correlation_id"))
        if corr in messages and (fn in _MARKER_OPS or not ops):
            return domain, messages[corr]
        if "message" in rec:
            return domain, str(rec["message"])
    return domain, fn


def import_json(
    path: Path,
    text: str,
    bulk: BulkWriter,
    summary: ImportSummary,
    agents: list[GpuAgent] | None = None,
) -> KernelColumns | None:
    """Store the API and memory records; return the kernels (stored after annotation).
    ``agents``, where given, gets each process's GPU agents (:func:`gpu_agents`)."""
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
        kinds, messages = _kind_names(proc), _marker_messages(proc)
        nodes = _agent_nodes(proc)
        if agents is not None:
            agents += gpu_agents(proc)
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
                nodes.get(h, h) if (h := _handle(di.get("agent_id"))) is not None else None,
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
                domain, fn = _op_name(kinds, messages, kind, rec)
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
            _, op = _op_name(kinds, messages, "memory_copy", rec)
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
            _, op = _op_name(kinds, messages, "memory_allocation", rec)
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
        summary.add(
            "counters", bulk.insert("counters", _COUNTER_COLS, _counters(proc, syms, where))
        )
    summary.files.append(str(path))
    return KernelColumns.from_rows(KERNEL_COLS, kflat) if kflat else None


_COUNTER_COLS = ("source", "name", "key", "value", "t_ns")


def _counters(proc: Mapping[str, Any], syms: dict[int, str], where: str) -> list[list[Any]]:
    """The counter collection's values as the CSV writes them (``generateCSV.cpp``, the counter
    collection's ``generate_csv``): per dispatch, one row per counter id, its instances' values
    summed, in counter id order, keyed by the dispatch's kernel name; the dispatch's start."""
    names: dict[int, str] = {}
    for c in _list(proc.get("counters", []), f"{where} counters"):
        c = _obj(c, f"{where} counters")
        cid = _handle(c.get("id"))
        if cid is not None and isinstance(c.get("name"), str):
            names.setdefault(cid, c["name"])
    cb = _obj(proc.get("callback_records") or {}, f"{where} callback_records")
    out: list[list[Any]] = []
    for rec in _list(cb.get("counter_collection", []), f"{where} counter_collection"):
        rec = _obj(rec, f"{where} counter_collection")
        dd = _obj(_req(rec, "dispatch_data", f"{where} counter_collection"), f"{where} dispatch")
        di = _obj(_req(dd, "dispatch_info", f"{where} dispatch_data"), f"{where} dispatch_info")
        kid = to_int(_req(di, "kernel_id", f"{where} dispatch_info"), "kernel_id")
        start = to_int(dd.get("start_timestamp"), "start_timestamp")
        sums: dict[int, float] = {}
        for v in _list(rec.get("records", []), f"{where} counter records"):
            v = _obj(v, f"{where} counter records")
            cid = _handle(v.get("counter_id"))
            value = to_float(v.get("value"), "counter value")
            if cid is not None and value is not None:
                sums[cid] = sums.get(cid, 0.0) + value
        kernel = syms.get(kid, f"kernel_{kid}")
        out += [["rocprof-counters", names.get(cid, f"counter {cid}"), kernel, value, start]
                for cid, value in sorted(sums.items())]  # fmt: skip
    return out

"""Write a :class:`Trace` as rocprofv3 ``-f json`` writes ``<pid>_results.json``, from
rocprofiler-sdk (ROCm/rocm-systems ``projects/rocprofiler-sdk``): ``source/lib/output/
generateJSON.cpp`` (top key ``rocprofiler-sdk-tool``, a list of process objects with
``metadata``, ``agents``, ``strings``, ``kernel_symbols``, ``buffer_records``) and
``source/docs/rocprofv3-schema.json`` (record fields). Records carry *integer* ``kind`` and
``operation`` codes: the names are ``strings.buffer_records[kind].operations[operation]`` (as the
SDK's ``tests/rocprofv3/*/validate.py`` read them); ``correlation_id`` is ``{internal,
external}``; roctx messages are ``strings.marker_api`` entries ``{key: internal id, value}``.

Kind codes are the ``rocprofiler_buffer_tracing_kind_t`` order (``include/rocprofiler-sdk/
fwd.h``); HIP operation codes the ``rocprofiler_hip_runtime_api_id_t`` order
(``include/rocprofiler-sdk/hip/runtime_api_id.h``, rocm-systems 1b1610f) for the calls used
here; the other HIP operation slots get placeholder names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conformance.model import HIP_KIND, MARK_OP, RANGE_KIND, RANGE_OP, Trace

KINDS = ["NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API",
         "HSA_FINALIZE_EXT_API", "HIP_RUNTIME_API", "HIP_COMPILER_API", "MARKER_CORE_API",
         "MARKER_CONTROL_API", "MARKER_NAME_API", "MEMORY_COPY", "KERNEL_DISPATCH",
         "SCRATCH_MEMORY", "CORRELATION_ID_RETIREMENT", "RCCL_API", "OMPT",
         "MEMORY_ALLOCATION", "RUNTIME_INITIALIZATION", "ROCDECODE_API", "ROCJPEG_API",
         "HIP_STREAM", "HIP_RUNTIME_API_EXT", "HIP_COMPILER_API_EXT", "ROCDECODE_API_EXT",
         "KFD_EVENT_PAGE_MIGRATE", "KFD_EVENT_PAGE_FAULT", "KFD_EVENT_QUEUE",
         "KFD_EVENT_UNMAP_FROM_GPU", "KFD_EVENT_DROPPED_EVENTS", "KFD_PAGE_MIGRATE",
         "KFD_PAGE_FAULT", "KFD_QUEUE", "MARKER_CORE_RANGE_API"]  # fmt: skip
HIP_OPS = {"hipDeviceSynchronize": 66, "hipGraphLaunch": 166, "hipLaunchKernel": 214,
           "hipMemcpyAsync": 268, "hipModuleLaunchKernel": 308, "hipStreamSynchronize": 346}  # fmt: skip
N_HIP_OPS = 479
RANGE_OPS = ["roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxGetThreadId"]


def _strings() -> list[dict[str, Any]]:
    ops: dict[str, list[str]] = {k: [] for k in KINDS}
    hip = [f"hip_op_{i}" for i in range(N_HIP_OPS)]
    for name, i in HIP_OPS.items():
        hip[i] = name
    ops["HIP_RUNTIME_API"] = ops["HIP_RUNTIME_API_EXT"] = hip
    ops["KERNEL_DISPATCH"] = ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE",
                              "KERNEL_DISPATCH_COMPLETE"]  # fmt: skip
    ops[RANGE_KIND] = RANGE_OPS
    return [{"kind": k, "operations": ops[k]} for k in KINDS]


def _corr(internal: int, external: int = 0) -> dict[str, int]:
    return {"internal": internal, "external": external}


def process(trace: Trace) -> dict[str, Any]:
    """One process object of the ``rocprofiler-sdk-tool`` list."""
    agent = {"handle": 0x5F00 + trace.agent}
    kd = [
        {
            "size": 136, "kind": KINDS.index("KERNEL_DISPATCH"), "operation": 2,
            "thread_id": trace.tid, "correlation_id": _corr(k.corr, k.external),
            "start_timestamp": k.start, "end_timestamp": k.end,
            "dispatch_info": {
                "size": 64, "agent_id": agent, "queue_id": {"handle": 0x7A00},
                "kernel_id": k.kernel_id, "dispatch_id": k.dispatch_id,
                "private_segment_size": 0, "group_segment_size": 0,
                "workgroup_size": dict(zip("xyz", k.block, strict=True)),
                "grid_size": dict(zip("xyz", k.grid, strict=True)),
            },
        }
        for k in trace.kernels
    ]  # fmt: skip
    hip_kind = KINDS.index(HIP_KIND)
    hip = [
        {"size": 48, "kind": hip_kind, "operation": HIP_OPS[a.name], "thread_id": trace.tid,
         "correlation_id": _corr(a.corr), "start_timestamp": a.start, "end_timestamp": a.end}
        for a in trace.apis
    ]  # fmt: skip
    mk = KINDS.index(RANGE_KIND)
    marker = [
        {"size": 48, "kind": mk, "operation": RANGE_OPS.index(MARK_OP if m.is_mark else RANGE_OP),
         "thread_id": trace.tid, "correlation_id": _corr(m.corr), "start_timestamp": m.start,
         "end_timestamp": m.end}
        for m in trace.markers
    ]  # fmt: skip
    symbols = [
        {"size": 96, "kernel_id": kid, "code_object_id": 1, "kernel_name": name,
         "kernel_object": 0x1000 + kid, "kernarg_segment_size": 64,
         "kernarg_segment_alignment": 8, "group_segment_size": 0, "private_segment_size": 0,
         "formatted_kernel_name": name, "demangled_kernel_name": name,
         "truncated_kernel_name": name.split("(")[0]}
        for name, kid in trace.symbols().items()
    ]  # fmt: skip
    empty = ("hsa_api", "rccl_api", "memory_copy", "memory_allocation", "scratch_memory",
             "rocdecode_api", "rocjpeg_api", "pc_sample_host_trap", "pc_sample_stochastic")  # fmt: skip
    return {
        "metadata": {
            "pid": trace.pid,
            "init_time": trace.t0,
            "fini_time": trace.t_end,
            "node": {"hostname": trace.host},
            "command": ["python3", "serve.py"],
            "config": {},
        },  # fmt: skip
        "agents": [
            {"size": 512, "id": {"handle": 0x5F00}, "type": 1, "node_id": 0},
            {
                "size": 512,
                "id": agent,
                "type": 2,
                "node_id": trace.agent,
                "name": trace.arch or "",
                "vendor_name": "AMD",
                "product_name": trace.product or "",
                "model_name": "",
            },
        ],
        "counters": [],
        "strings": {
            "callback_records": [],
            "buffer_records": _strings(),
            "marker_api": [{"key": m.corr, "value": m.message} for m in trace.markers],
            "correlation_id": {"external": []},
            "counters": {"dimension_ids": []},
            "pc_sample_instructions": [],
            "pc_sample_comments": [],
            "att_filenames": [],
            "code_object_snapshot_filenames": [],
        },
        "code_objects": [],
        "kernel_symbols": symbols,
        "host_functions": [],
        "callback_records": {"counter_collection": []},
        "buffer_records": {
            "kernel_dispatch": kd,
            "hip_api": hip,
            "marker_api": marker,
            **{k: [] for k in empty},
        },  # fmt: skip
    }


def write_json(trace: Trace, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rocprofiler-sdk-tool": [process(trace)]}, indent=1))
    return path

"""The rows a run records, built in one place: steps, layers, captures, capture memory, and the
host-side analysis of a step (splits, padding).

Shared by the CPU runner, the CUDA capture runner and the vLLM plugin, so that every source
records the same columns the same way. Uses only host values the builder already holds.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mlaprof.scenario import KV_DIM, Scenario
from mlaprof.step_splits import StepSplits, step_splits

if TYPE_CHECKING:
    from mlaprof.metadata import BatchShape, VerifyMetadata

KV_BYTES_PER_ELEMENT = 2  # bf16 KV cache


def event_row(
    source: str, kind: str, message: str, data: Any = None, t_ns: int | None = None
) -> dict[str, Any]:
    """An ``events`` row: ``data`` is stored as JSON text (a string is kept as it is)."""
    text = data if data is None or isinstance(data, str) else json.dumps(data)
    return {
        "t_ns": time.time_ns() if t_ns is None else t_ns,
        "source": source,
        "kind": kind,
        "message": message,
        "data": text,
    }


def step_row(
    step: int,
    shape: BatchShape,
    t_start_ns: int,
    duration_ns: int,
    graph_mode: str,
    backend: str,
    timing: str,
) -> dict[str, int | str]:
    """One ``steps`` record of a scenario batch (the runners' common shape columns)."""
    return {
        "step": step,
        "t_start_ns": t_start_ns,
        "duration_ns": duration_ns,
        "num_reqs": shape.num_reqs,
        "num_real_reqs": shape.num_real,
        "qlen": shape.qlen,
        "real_tokens": shape.real_tokens,
        "padded_tokens": shape.padded_tokens,
        "graph_mode": graph_mode,
        "backend": backend,
        "timing": timing,
    }


def layer_row(
    step: int,
    layer: int,
    t_start_ns: int | None,
    duration_ns: int | None,
    syncs: int | None,
    splits_used: int | None,
    splits_deserved: int | None,
) -> dict[str, int | None]:
    """One ``layers`` record (``syncs`` None: the layer was not watched)."""
    return {
        "step": step,
        "layer": layer,
        "t_start_ns": t_start_ns,
        "duration_ns": duration_ns,
        "syncs": syncs,
        "splits_used": splits_used,
        "splits_deserved": splits_deserved,
    }


def capture_row(
    capture_size: int | None,
    graph_mode: str,
    status: str,
    message: str | None = None,
    fallback: str | None = None,
    op: str | None = None,
    layer: int | None = None,
    location: str | None = None,
) -> dict[str, int | str | None]:
    """One ``captures`` record: what happened (or is predicted) when capturing a size."""
    return {
        "capture_size": capture_size,
        "graph_mode": graph_mode,
        "status": status,
        "fallback": fallback,
        "op": op,
        "layer": layer,
        "location": location,
        "message": message,
    }


# a memory row's graph mode suffix for the instrumented timing twin of a serving graph (captured
# beside it with an event per layer, replayed only to time the layers; it serves no step)
TWIN = "+events"
# a memory row's graph mode suffix for a FULL capture attempt that failed: no graph was kept and
# no bytes were measured (the attempt runs in a probe process), only its time; like the timing
# twin ("FULL+events") it is no serving graph (mlaprof.analysis.memory.serving_memory)
ATTEMPT = "+attempt"


def memory_row(
    capture_size: int | None,
    graph_mode: str,
    pool_bytes: int | None,
    allocator_bytes: int | None,
    driver_bytes: int | None,
    capture_ns: int | None,
) -> dict[str, int | str | None]:
    """One ``memory`` record: the three views of what a capture cost (see gpu.session)."""
    return {
        "capture_size": capture_size,
        "graph_mode": graph_mode,
        "pool_bytes": pool_bytes,
        "allocator_bytes": allocator_bytes,
        "driver_bytes": driver_bytes,
        "capture_ns": capture_ns,
    }


def attempt_memory_row(capture_size: int | None, capture_ns: int | None) -> dict[str, Any]:
    """The ``memory`` record of a FULL capture attempt that failed: its time, no bytes (none
    were measured, and no graph was kept: the steps then run eagerly)."""
    return memory_row(capture_size, "FULL" + ATTEMPT, None, None, None, capture_ns)


def padding_row(step: int, meta: VerifyMetadata, shape: BatchShape) -> dict[str, int | None]:
    real_seq = [s for s, q in zip(meta.host_seq_lens, meta.host_qo_lens, strict=True) if q > 0]
    pad_seq = [s for s, q in zip(meta.host_seq_lens, meta.host_qo_lens, strict=True) if q == 0]
    row_bytes = KV_DIM * KV_BYTES_PER_ELEMENT
    return {
        "step": step,
        "capture_size": shape.capture_size,
        "real_rows": len(real_seq),
        "padding_rows": len(pad_seq),
        "real_tokens": shape.real_tokens,
        "padding_tokens": shape.padded_tokens - shape.real_tokens,
        "kv_bytes_real": sum(real_seq) * row_bytes,
        "kv_bytes_padding": sum(pad_seq) * row_bytes,
    }


def split_row(step: int, sc: Scenario, shape: BatchShape, s: StepSplits) -> dict:
    """One ``splits`` record."""
    return {
        "step": step,
        "capture_size": shape.capture_size,
        "policy": s.policy,
        "used": s.used,
        "deserved": s.deserved,
        "frozen": s.frozen,
        "all_rows": s.all_rows,
        "active_rows": s.active_rows,
        "min_kv_used": s.min_kv_used,
        "min_kv_deserved": s.min_kv_deserved,
        "occupancy_used": s.occupancy_used,
        "occupancy_deserved": s.occupancy_deserved,
        "target": sc.target,
        "note": s.note,
    }


def scenario_splits(
    sc: Scenario, meta: VerifyMetadata, shape: BatchShape, policies: list[str] | None = None
) -> list[StepSplits]:
    """S per policy for a scenario step. vLLM hands the ASM kernel its whole persistent
    kv_indices buffer (max_num_seqs * max_model_len entries, mlaprof.splits.reservation), and
    get_meta_param reads that length as total_kv."""
    buffer = sc.max_num_seqs * sc.max_model_len
    return step_splits(meta, sc.heads, sc.device_preset, shape.graph_mode, sc.max_model_len,
                       policies, kv_buffer_len=buffer,
                       full_graphs=sc.graph_mode == "FULL")  # fmt: skip


def step_analysis_rows(
    sc: Scenario, step: int, meta: VerifyMetadata, shape: BatchShape
) -> tuple[list[tuple[str, dict[str, Any]]], StepSplits | None]:
    """The step's splits and padding rows as ``(table, row)`` pairs, and the scenario policy's
    splits: for the caller to write in the step's own commit (a step is all of it or nothing)."""
    splits = scenario_splits(sc, meta, shape)
    rows: list[tuple[str, dict[str, Any]]] = [
        ("splits", split_row(step, sc, shape, s)) for s in splits
    ]
    rows.append(("padding", padding_row(step, meta, shape)))
    return rows, next((s for s in splits if s.policy == sc.policy), None)

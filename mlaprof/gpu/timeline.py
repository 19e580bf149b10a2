"""Kernel timelines of a GPU run: its last steps served under ``torch.profiler`` (CUPTI kernel
records), their kernels recorded with device timestamps, so Perfetto and CSV exports of the run
show real kernels.

The profiler slows graph replay (PyTorch CUDA graph behaviour measured on an H200: 1.07-1.64x on 61-layer graphs), so these steps
carry their own timing label (``graph-replay-profiled`` / ``eager-profiled``), which the step
timing summary leaves out, and their kernel durations include the profiler's cost.

Layers: in a graph replay the n-th ``mla_verify_stage1`` kernel starts layer n (every kernel up to
the next one belongs to it); in eager steps each layer runs inside a ``record_function`` range
named ``mlaprof layer <i>``, which the profiler also draws on the GPU (``gpu_user_annotation``),
and a kernel belongs to the range it starts in. The parsing is pure Python (tested on the CPU).
"""

from __future__ import annotations

import bisect
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlaprof.importers.common import us_to_ns
from mlaprof.importers.kineto import load_events, parse

LAYER_MARK = "mlaprof layer "
LAYER_START_KERNEL = "mla_verify_stage1"
# kernel row layout of ``importers.kineto.load_events``
_COLS = (
    "name", "start_ns", "end_ns", "device", "stream", "correlation",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "graph_id", "graph_node_id", "replay",
)  # fmt: skip


def layer_marks(doc: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """(start_ns, end_ns, layer) of the GPU-side ``mlaprof layer <i>`` ranges, by start."""
    base = int(doc.get("baseTimeNanoseconds", 0) or 0)
    out = []
    for ev in doc["traceEvents"]:
        if not isinstance(ev, Mapping) or ev.get("ph") != "X":
            continue
        if str(ev.get("cat", "")).lower() != "gpu_user_annotation":
            continue
        name = str(ev.get("name", ""))
        if not name.startswith(LAYER_MARK) or not name[len(LAYER_MARK) :].isdigit():
            continue
        start = base + us_to_ns(ev.get("ts"), "layer range ts")
        end = start + us_to_ns(ev.get("dur", 0), "layer range dur")
        out.append((start, end, int(name[len(LAYER_MARK) :])))
    return sorted(out)


def kernel_records(doc: Mapping[str, Any], path: Path, step: int) -> list[dict[str, Any]]:
    """The ``kernels`` records of one profiled step, each with its layer where known."""
    krows, _, _, _ = load_events(path, doc)
    marks = layer_marks(doc)
    starts = [m[0] for m in marks]
    out: list[dict[str, Any]] = []
    layer_in_replay: dict[Any, int] = {}
    for row in krows:
        rec = dict(zip(_COLS, row, strict=True))
        layer = None
        if marks:
            i = bisect.bisect_right(starts, rec["start_ns"]) - 1
            if i >= 0 and rec["start_ns"] <= marks[i][1]:
                layer = marks[i][2]
        else:
            key = rec["replay"]
            if LAYER_START_KERNEL in str(rec["name"]):
                layer_in_replay[key] = layer_in_replay.get(key, -1) + 1
            layer = layer_in_replay.get(key)
        rec.update(step=step, layer=layer, splits=None)
        out.append(rec)
    return out


class StepProfile:
    """``with StepProfile(torch, on): ...``: when ``on``, the block runs under the profiler (CPU
    and CUDA activities) and ``doc`` holds its Chrome trace afterwards; otherwise a no-op."""

    def __init__(self, torch: Any, on: bool) -> None:
        self.torch = torch
        self.on = on
        self.doc: dict[str, Any] | None = None
        self.path = Path("torch.profiler")
        self._prof: Any = None

    def __enter__(self) -> StepProfile:
        if self.on:  # pragma: no cover - needs a GPU
            from torch.profiler import ProfilerActivity, profile

            acts = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
            self._prof = profile(activities=acts)
            self._prof.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.on:
            return
        self.torch.cuda.synchronize()  # pragma: no cover - needs a GPU
        self._prof.__exit__(*exc)
        if exc[0] is not None:
            return
        fd, name = tempfile.mkstemp(suffix=".json", prefix="mlaprof-timeline-")
        os.close(fd)
        path = Path(name)
        try:
            self._prof.export_chrome_trace(str(path))
            self.doc = parse(path, path.read_text())
        finally:
            path.unlink(missing_ok=True)

    def records(self, step: int) -> list[dict[str, Any]]:
        return kernel_records(self.doc, self.path, step) if self.doc is not None else []

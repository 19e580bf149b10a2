"""Adapter for an imported vLLM log: the capture evidence is what the log's last server start
asked for and ended with, and each of its ranks' capture memory (their labelled sum beside
them); memory is never summed across starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.evidence.common import capture, load_tables
from mlaprof.analysis.evidence.model import CaptureStatus, Evidence, Provenance, run_meta
from mlaprof.analysis.memory import CAPTURE_MEMORY_MEASURE
from mlaprof.analysis.starts import engine_starts, log_capture
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


def log_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    src = run.meta.get("imported_from")
    prov = Provenance("imported", f"from {src}" if src else "from a vLLM log")
    starts = engine_starts(t["events"], src)
    if starts:
        cap = log_capture(starts, CAPTURE_MEMORY_MEASURE)  # what vLLM's line measures
    else:
        cap = capture(CaptureStatus.UNKNOWN, str(prov), why="no server start in the log")
    return Evidence(
        kind=RunKind.LOG,
        name=run.name,
        status=run.status,
        meta=run_meta(run.meta),
        ranks=run.ranks,
        tables=t,
        capture=cap,
        device=(
            f"{starts[-1].device} (the engine config line's device_config)"
            if starts and starts[-1].device
            else "unknown (the log names no device_config)"
        ),
        provenance=prov,
        starts=starts,
    )

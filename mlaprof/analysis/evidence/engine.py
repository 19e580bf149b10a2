"""Adapter for a live vLLM engine recorded by the plugin: the capture evidence is the graph mode
the engine ran each step with (measured), never a prediction."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mlaprof.analysis.evidence.common import capture, load_tables
from mlaprof.analysis.evidence.model import CaptureStatus, Evidence, Provenance
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.store.reader import Run

_FULL_MODES = ("FULL", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY")


def engine_capture(steps: pd.DataFrame, provenance: str) -> dict:
    """The capture evidence of an engine run: the mode most steps ran with."""
    modes = Counter(str(m) for m in steps["graph_mode"].dropna()) if not steps.empty else {}
    if not modes:
        return capture(CaptureStatus.UNKNOWN, provenance, why="no engine step recorded")
    mode = max(modes, key=lambda m: modes[m])
    if set(modes) == {"NONE"}:
        status = CaptureStatus.EAGER
    elif mode in _FULL_MODES:
        status = CaptureStatus.REPLAYED
    else:
        status = CaptureStatus.PIECEWISE
    return capture(status, provenance, mode=mode, effective_mode=mode, modes=dict(modes))


def engine_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    device = str(run.meta.get("device") or "")
    prov = Provenance("measured", f"on {device}" if device else "by the engine")
    return Evidence(
        kind=RunKind.ENGINE,
        name=run.name,
        status=run.status,
        meta=run.meta,
        ranks=run.ranks,
        tables=t,
        capture=engine_capture(t["steps"], "measured: graph mode per engine step"),
        device=device or "unknown (the engine run did not record its device)",
        provenance=prov,
    )

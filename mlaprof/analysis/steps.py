"""Per step: how it ran (its capture mode, from how its MLA kernels ran), the path and kernel
variant, batch rows, qlen, S and layers (the per-step table of a run with kernel grids)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from mlaprof.analysis.capture_status import CAPTURE_LABELS, CaptureStatus
from mlaprof.analysis.grid import _split_backend
from mlaprof.analysis.sections import TraceStep
from mlaprof.analysis.step_stats import for_steps

# a step's capture mode from how its MLA kernels ran: inside a graph launch (FULL: vLLM's
# PIECEWISE graphs leave attention out), eager between graph pieces (PIECEWISE), eager; a trace
# without correlation ids cannot tell (unknown)
CAPTURE_OF_MODE = {"graph": "FULL", "piecewise": "PIECEWISE", "eager": "eager"}
# a replay no graph-launch call in the trace confirms (kernels that only share a correlation
# id): the capture verdict says no FULL there (analysis.capture.step_mode_evidence), nor does a step
UNCONFIRMED_REPLAY = CAPTURE_LABELS[CaptureStatus.REPLAYED]


def step_capture(graph_mode: Any, launches_confirm: bool = True) -> str:
    """A step's capture mode from its kernels' mode; a graph replay reads FULL only where a
    graph-launch call in the trace confirms it (``launches_confirm``)."""
    if not isinstance(graph_mode, str):
        return "unknown"
    if graph_mode == "graph" and not launches_confirm:
        return UNCONFIRMED_REPLAY
    return CAPTURE_OF_MODE.get(graph_mode, "unknown")


def trace_steps(
    steps: pd.DataFrame, stats: pd.DataFrame, launches_confirm: bool = True
) -> list[TraceStep]:
    """Per step: how it ran (its capture mode), the path and kernel variant, batch rows, qlen,
    S and layers. ``launches_confirm``: the trace holds graph-launch calls (the capture verdict's
    own rule for saying FULL)."""
    if steps.empty:
        return []
    st = _split_backend(steps[steps["backend"].notna()]).sort_values(["rank", "step"])
    st["S"] = for_steps(st, stats, "S")
    st["n_layers"] = for_steps(st, stats, "n_layers")

    def nums(col: str) -> list[int | None]:
        # a column as Python values at once (a fleet holds tens of thousands of steps: per-row
        # pandas access cost more than the rest of the trace's section)
        return [None if v is None or v != v else int(v) for v in st[col].tolist()]

    # a step's capture depends on its graph mode only: worded once per mode
    capture = {
        m: step_capture(m, launches_confirm)
        for m in st["graph_mode"].unique()
        if isinstance(m, str)
    }
    return [
        TraceStep(
            rank=int(rank),
            step=int(step),
            graph_mode=mode if isinstance(mode, str) else None,
            capture=capture[mode] if isinstance(mode, str) else step_capture(None),
            path=path,
            variant=variant,
            rows=rows,
            qlen=qlen,
            S=s_used,
            layers=layers,
            duration_us=float(dur) / 1e3,
        )
        for rank, step, mode, path, variant, rows, qlen, s_used, layers, dur in zip(
            st["rank"].tolist(),
            st["step"].tolist(),
            st["graph_mode"].tolist(),
            st["path"].tolist(),
            st["variant"].tolist(),
            nums("num_reqs"),
            nums("qlen"),
            nums("S"),
            nums("n_layers"),
            st["duration_ns"].tolist(),
            strict=True,
        )
    ]

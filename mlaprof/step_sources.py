"""What an importer records about the trace it read, and what the analysis reads back: how it
found the trace's steps (the step-source names and their texts) and the run-length encoding
per-step values are kept in (shared by :mod:`mlaprof.importers` and :mod:`mlaprof.analysis`, so
the analysis imports no importer)."""

from __future__ import annotations

from typing import Any

SOURCE_RANGES = "roctx-ranges"
SOURCE_SAMPLER = "step-closing-kernels"
SOURCE_GAPS = "idle-gaps"
SOURCE_GRAPHS = "graph-launches"  # every MLA step is a graph replay: nothing else to tell

SOURCE_TEXT = {
    SOURCE_RANGES: "roctx/NVTX ranges: each MLA kernel in the step range its launch call was made in",
    SOURCE_SAMPLER: "the kernels vLLM runs at the end of every step (rejection sampler, argmax)",
    SOURCE_GAPS: (
        "idle gaps between MLA kernels (no roctx range or step-closing kernel marks the steps): "
        "step bounds are a guess"
    ),
    SOURCE_GRAPHS: "graph launches: every MLA step is one replay",
}


def rle(values: list[Any]) -> list[list[Any]]:
    """``[[value, run length], ...]``: per-step values kept small in the run's metadata."""
    out: list[list[Any]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def unrle(runs: Any) -> list[Any]:
    """The values of :func:`rle` again (an absent or malformed list gives none)."""
    out: list[Any] = []
    for item in runs or []:
        if isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[1], int):
            out.extend([item[0]] * max(0, item[1]))
    return out

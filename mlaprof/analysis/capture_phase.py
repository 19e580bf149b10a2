"""The capture phase inside a whole-process trace, told from the trace's own structure.

A trace of a whole vLLM process holds its start-up before the served steps: for each FULL decode
capture size, one eager warm-up forward (vLLM 0.32 ``gpu_model_runner.py`` ``_capture_cudagraphs``
-> ``_dummy_run(..., CUDAGraphMode.NONE, force_attention=True)``, no sampler), then
``hipStreamBeginCapture``, launch calls that dispatch nothing, ``hipStreamEndCapture`` and
``hipGraphInstantiate``; only then the served replays (``hipGraphLaunch``). The warm-ups run the
MLA kernels eagerly at every capture size, so read as served steps they make a FULL-graph server
look "mixed" with eager steps of every batch size.

Per rank the phase ends with its last stream-capture end or graph instantiation; every step that
started before that end is start-up work (warm-ups, the memory-profiling dummy run), not a served
step. The phase is its own section (graphs captured, warm-up forwards and their batch rows, time,
allocations) and its steps are left out of every served-step analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.sections import CapturePhase, CapturePhaseRank
from mlaprof.rank_counts import counted

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

BEGIN = ("hipStreamBeginCapture", "hipStreamBeginCaptureToGraph", "cudaStreamBeginCapture",
         "cudaStreamBeginCaptureToGraph")  # fmt: skip
END = ("hipStreamEndCapture", "cudaStreamEndCapture")
INSTANTIATE = ("hipGraphInstantiate", "hipGraphInstantiateWithFlags",
               "hipGraphInstantiateWithParams", "cudaGraphInstantiate",
               "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams")  # fmt: skip
CALLS = BEGIN + END + INSTANTIATE


def _calls(run: Run) -> pd.DataFrame:
    # portable: a trace without an API table, or with a small one, is answered by SQLite (a
    # fleet report then opens no DuckDB database for it); the order is total on ties of start
    return run.query(
        "SELECT rank, function, start_ns, end_ns FROM api WHERE function IN ("
        + ", ".join("?" * len(CALLS))
        + ") ORDER BY rank, start_ns, end_ns, function",
        CALLS,
        portable=True,
    )


def _allocations(run: Run) -> pd.DataFrame:
    return run.query(
        "SELECT rank, size_bytes, start_ns FROM transfers WHERE kind LIKE 'MEMORY_ALLOCATION%' "
        "AND operation LIKE '%ALLOCATE%' ORDER BY rank, start_ns"
    )


def capture_phase(run: Run, steps: pd.DataFrame) -> tuple[CapturePhase | None, pd.Series]:
    """(the capture-phase section, or None when the trace holds no capture call; a mask over
    ``steps``: True for the steps inside the phase). ``steps``: the run's verify steps."""
    none = pd.Series(False, index=steps.index)
    calls = _calls(run)
    if calls.empty:
        return None, none
    allocs = _allocations(run)
    src = run.meta.get("imported_from")
    prov = f"imported from {src}" if src else "from the trace"
    rows, mask = [], none.copy()
    for rank, c in calls.groupby("rank"):
        ends = c[c["function"].isin(END + INSTANTIATE)]
        if ends.empty:
            continue
        end = int(ends["end_ns"].max())
        mine = steps[(steps["rank"] == rank) & (steps["t_start_ns"] < end)]
        mask.loc[mine.index] = True
        begin = int(min([int(c["start_ns"].min()), *mine["t_start_ns"].astype("int64")]))
        warm = mine.sort_values("t_start_ns")
        a = allocs[(allocs["rank"] == rank) & allocs["start_ns"].between(begin, end)]
        rows.append(
            CapturePhaseRank(
                rank=int(rank),
                graphs_captured=int(c["function"].isin(BEGIN).sum()),
                instantiated=int(c["function"].isin(INSTANTIATE).sum()),
                warmup_steps=len(warm),
                warmup_rows=[int(x) for x in warm["num_reqs"].dropna()],
                warmup_step_ids=[int(x) for x in warm["step"]],
                start_ns=begin,
                end_ns=end,
                duration_ms=round((end - begin) / 1e6, 3),
                # None where the trace has no memory-allocation records to count
                allocations=int(len(a)) if not allocs.empty else None,
                allocated_bytes=int(a["size_bytes"].fillna(0).sum()) if not allocs.empty else None,
            )
        )
    if not rows:
        return None, none
    return CapturePhase(ranks=rows, text=_text(rows), provenance=prov), mask


def _text(rows: list[CapturePhaseRank]) -> str:
    r = rows[0]
    sizes = sorted(set(r.warmup_rows), reverse=True)
    mem = (
        f"{counted(r.allocations, 'allocation(s)')}, {(r.allocated_bytes or 0) / 2**20:.1f} MiB"
        if r.allocations is not None
        else "allocations unknown (no memory-allocation trace)"
    )
    where = "" if len(rows) == 1 else f" (rank {r.rank}; {len(rows)} ranks captured)"
    return (
        f"capture phase{where}: {counted(r.graphs_captured, 'graph(s)')} captured, "
        f"{r.instantiated} instantiated, after "
        f"{counted(r.warmup_steps, 'eager warm-up forward(s)')}"
        + (f" at batch rows {', '.join(map(str, sizes))}" if sizes else "")
        + f"; {r.duration_ms:.3f} ms; {mem}. Its steps are start-up work, not served steps, "
        "and are left out of every step below"
    )


__all__ = ["capture_phase"]

"""Questions 4-5: does the step capture, what does capture cost, where does the time go?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.capture_status import NO_FULL_GRAPH
from mlaprof.analysis.findings import Finding
from mlaprof.sync_kinds import PREDICTS_FAILURE

GIB = 1024**3


def serving_memory(memory: pd.DataFrame) -> pd.DataFrame:
    """Capture-memory rows of the graphs that serve steps (not the instrumented timing twins)."""
    if memory.empty:
        return memory
    return memory[~memory["graph_mode"].fillna("").str.contains("+", regex=False)]


# The one capture-memory measure every view shows, by this name: the drop in the driver's free
# memory across capture (what vLLM logs as "Graph capturing finished ... took X GiB"). The pool and
# allocator views are evidence in the memory finding, never the headline number.
CAPTURE_MEMORY_MEASURE = "driver free-memory delta"
# statuses that mean "no FULL graph" (the one rule: mlaprof.analysis.evidence.model)
FAILED_CAPTURE = tuple(sorted(NO_FULL_GRAPH))


def capture_memory_bytes(memory: pd.DataFrame) -> int | None:
    """The capture memory (:data:`CAPTURE_MEMORY_MEASURE`) of the serving graphs; ``None`` when
    no row records it (unknown, never 0)."""
    memory = serving_memory(memory)
    if memory.empty or not memory["driver_bytes"].notna().any():
        return None
    return int(pd.to_numeric(memory["driver_bytes"], errors="coerce").fillna(0).sum())


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def capture_summary(
    run_meta: dict, syncs: pd.DataFrame, captures: pd.DataFrame, memory: pd.DataFrame
) -> dict:
    mode = run_meta.get("scenario", {}).get("graph_mode", "FULL")
    failed = captures[captures["status"] == "failed"] if not captures.empty else captures
    captured = captures[captures["status"] == "captured"] if not captures.empty else captures
    blocking = syncs[syncs["kind"].isin(PREDICTS_FAILURE)] if not syncs.empty else syncs
    if not failed.empty:
        status, effective = (
            "failed",
            str(failed["fallback"].dropna().iloc[0])
            if failed["fallback"].notna().any()
            else "PIECEWISE",
        )
    elif not captured.empty:
        status, effective = "captured", mode
    elif mode == "FULL" and not blocking.empty:
        status, effective = "predicted-fail", "PIECEWISE"
    else:
        status, effective = ("predicted-ok" if mode == "FULL" else "not-attempted"), mode
    return {
        "mode": mode,
        "status": status,
        "effective_mode": effective,
        "memory_bytes": capture_memory_bytes(memory),
        "memory_measure": CAPTURE_MEMORY_MEASURE,
        "sizes": int(serving_memory(memory)["capture_size"].nunique()) if not memory.empty else 0,
    }


def capture_findings(summary: dict, captures: pd.DataFrame, memory: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = []
    if summary["status"] in ("failed", "predicted-fail"):  # measured or predicted here
        first = captures[captures["status"] == "failed"].head(1) if not captures.empty else captures
        where = ""
        if not first.empty:
            r = first.iloc[0]
            where = f": first offender {r.op} on layer {r.layer} at {r.location}"
        out.append(
            Finding(
                kind="capture",
                severity="critical",
                title=(
                    "FULL graph capture "
                    + ("failed" if summary["status"] == "failed" else "would fail")
                    + f"; the engine runs {summary['effective_mode']} instead"
                    + where
                ),
                evidence=(
                    "a device->host sync or data-dependent allocation inside the captured region "
                    "invalidates the capture (see the sync findings)"
                ),
                fix="move every sync into the metadata builder; then FULL graphs capture",
                location=None if first.empty else str(first.iloc[0].location),
            )
        )
    memory = serving_memory(memory)
    if not memory.empty:
        pool = memory["pool_bytes"].fillna(0).sum()
        alloc = memory["allocator_bytes"].fillna(0).sum()
        driver = memory["driver_bytes"].fillna(0).sum()
        sizes = memory["capture_size"].nunique()
        mem = summary.get("memory_bytes")
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=(
                    f"capture memory ({CAPTURE_MEMORY_MEASURE}): "
                    f"{'unknown' if mem is None else human_bytes(mem)} over {sizes} capture size(s)"
                ),
                evidence=(
                    f"private pool {human_bytes(pool)}, caching allocator {human_bytes(alloc)}, "
                    f"driver free-memory delta {human_bytes(driver)} (what vLLM logs); "
                    f"capture took {memory['capture_ns'].fillna(0).sum() / 1e6:.1f} ms"
                ),
                fix="capture fewer sizes or share one pool if memory is tight",
            )
        )
    return out

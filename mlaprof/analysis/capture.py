"""Questions 4-5: does the step capture, what does capture cost, where does the time go?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding

GIB = 1024**3


def capture_summary(
    run_meta: dict, syncs: pd.DataFrame, captures: pd.DataFrame, memory: pd.DataFrame
) -> dict:
    mode = run_meta.get("scenario", {}).get("graph_mode", "FULL")
    failed = captures[captures["status"] == "failed"] if not captures.empty else captures
    captured = captures[captures["status"] == "captured"] if not captures.empty else captures
    blocking = syncs[syncs["kind"] != "alloc"] if not syncs.empty else syncs
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
    mem = None
    if not memory.empty:
        col = memory["pool_bytes"].fillna(memory["driver_bytes"])
        mem = int(col.fillna(0).sum())
    return {"mode": mode, "status": status, "effective_mode": effective, "memory_bytes": mem}


def capture_findings(summary: dict, captures: pd.DataFrame, memory: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = []
    if summary["status"] in ("failed", "predicted-fail"):
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
    if not memory.empty:
        total = memory["pool_bytes"].fillna(memory["driver_bytes"]).fillna(0).sum()
        out.append(
            Finding(
                kind="memory",
                severity="info",
                title=f"graph capture holds {total / GIB:.3f} GiB over {len(memory)} capture size(s)",
                evidence="per capture size: pool (private mempool), allocator and driver deltas "
                "in the memory table",
                fix="capture fewer sizes or share one pool if memory is tight",
            )
        )
    return out

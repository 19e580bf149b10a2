"""Question 5: where does the time go per layer, and what does not capturing cost?"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.findings import Finding


def timing_summary(steps: pd.DataFrame, layers: pd.DataFrame) -> dict:
    if steps.empty:
        return {"steps": 0, "step_median_us": None, "layer_median_us": None, "by_mode": {}}
    # the serving graph's plain replays are the reference; twin (instrumented) replays are
    # corrected for the event cost but still a sample
    plain = steps[steps["timing"] == "graph-replay"]
    if not plain.empty:
        steps = pd.concat([plain, steps[~steps["timing"].fillna("").str.startswith("graph")]])
    by_mode = {
        str(mode): float(g["duration_ns"].median()) / 1e3
        for mode, g in steps.dropna(subset=["duration_ns"]).groupby("graph_mode")
    }
    return {
        "steps": int(len(steps)),
        "timing": str(steps["timing"].dropna().iloc[0]) if steps["timing"].notna().any() else None,
        "step_median_us": float(steps["duration_ns"].median()) / 1e3,
        "layer_median_us": float(layers["duration_ns"].median()) / 1e3
        if not layers.empty
        else None,
        "by_mode": by_mode,
    }


def timing_findings(t: dict) -> list[Finding]:
    modes = t.get("by_mode", {})
    # live runs: FULL; imported traces: "graph" (steps replayed in a graph)
    ref = next((r for r in ("FULL", "graph") if r in modes), None)
    if ref and len(modes) > 1:
        other = {m: v for m, v in modes.items() if m != ref}
        m, v = max(other.items(), key=lambda kv: kv[1])
        ratio = v / modes[ref] if modes[ref] else float("nan")
        what = "FULL-graph replay" if ref == "FULL" else "graph replays (imported trace)"
        return [
            Finding(
                kind="timing",
                severity="warning" if ratio > 1.2 else "info",
                title=f"{m} steps take {ratio:.2f}x as long as {what}",
                evidence=f"median step {modes[ref]:.1f} us ({ref}) vs {v:.1f} us ({m})",
                fix="make the verify path capturable so every step replays the FULL graph",
                data={"ratio": ratio},
            )
        ]
    return []

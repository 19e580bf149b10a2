"""Native 4-D entry vs the flattened legacy path, from the run's path-check events."""

from __future__ import annotations

import json

import pandas as pd

from mlaprof.analysis.findings import Finding


def path_checks(events: pd.DataFrame) -> list[dict]:
    if events.empty:
        return []
    rows = events[events["kind"] == "path-check"]
    out = []
    for data in rows["data"]:
        try:
            out.append(json.loads(data))
        except (TypeError, ValueError):
            continue
    return out


def path_findings(checks: list[dict], run_backend: str) -> list[Finding]:
    by = {c.get("backend"): c for c in checks}
    legacy, native = by.get("legacy-flat"), by.get("torch")
    if not legacy or not native or run_backend == "legacy-flat":
        return []
    ops = ", ".join(sorted({o["op"] for o in legacy.get("ops", [])}))
    return [
        Finding(
            kind="sync",
            severity="info",
            title=(
                f"the flattened legacy verify path would do {legacy['syncs_per_layer']} syncs per "
                f"layer; the native 4-D path does {native['syncs_per_layer']}"
            ),
            evidence=f"path check on step 0, one layer each: {ops}",
            fix="keep calling the kernel's native 4-D MTP entry with builder-computed metadata",
            data={"legacy": legacy, "native": native},
        )
    ]

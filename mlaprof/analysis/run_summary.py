"""The facade over the analyzers (one per question, DESIGN.md): ``analyze(run)`` returns the
findings sorted by severity; ``summary(run)`` the report's JSON object, which every view renders.
"""

from __future__ import annotations

from typing import Any

from mlaprof.analysis.capture import capture_findings, capture_summary
from mlaprof.analysis.engine import engine_analysis, engine_capture
from mlaprof.analysis.engine_log import engine_log_findings, engine_starts, log_capture
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.headline import headline
from mlaprof.analysis.imported import (
    imported_findings,
    imported_summary,
    is_imported_trace,
    mark_unreliable,
)
from mlaprof.analysis.padding import padding_findings, padding_summary
from mlaprof.analysis.paths import path_checks, path_findings, route_findings, route_summary
from mlaprof.analysis.reservation import reservation_findings, reservation_summary
from mlaprof.analysis.splits import split_findings, split_summary
from mlaprof.analysis.syncs import sync_findings
from mlaprof.analysis.timing import timing_findings, timing_summary
from mlaprof.store.reader import Run


def _scenario(run: Run) -> dict[str, Any]:
    sc = run.meta.get("scenario")
    return sc if isinstance(sc, dict) else {}


_NEEDED = ("syncs", "captures", "memory", "splits", "padding", "steps", "layers", "events")


def _load(run: Run) -> dict[str, Any]:
    """Every table the analyzers read, queried once (each ``run.<table>`` access re-reads);
    an imported trace also gets its evidence summary (paths, capture and sync verdicts)."""
    t: dict[str, Any] = {name: run.table(name) for name in _NEEDED}
    if is_imported_trace(run.meta):
        t["imported"] = imported_summary(run, t["steps"], t["layers"])
    return t


def _capture(run: Run, t: dict[str, Any]) -> dict[str, Any]:
    """A recorded engine says what it ran; other runs get the capture verdict."""
    return engine_capture(run.meta, t["steps"]) or capture_summary(
        run.meta, t["syncs"], t["captures"], t["memory"]
    )


def analyze(
    run: Run, tables: dict[str, Any] | None = None, shadow: dict[str, str] | None = None
) -> list[Finding]:
    """Findings sorted by severity. ``shadow``: {"device": ..., "aiter": ...} for a recorded
    engine's modelled AITER view (defaults: mlaprof.analysis.engine.SHADOW_*)."""
    t = tables if tables is not None else _load(run)
    sc = _scenario(run)
    mode = sc.get("graph_mode", "FULL")
    findings: list[Finding] = []
    imp = t.get("imported")
    cap = imp["capture"] if imp else _capture(run, t)
    findings += capture_findings(cap, t["captures"], t["memory"])
    if imp:
        findings += imported_findings(run, t, imp)
    findings += engine_analysis(run.meta, t["events"], **(shadow or {}))[2]
    findings += sync_findings(t["syncs"], mode)
    findings += split_findings(t["splits"], sc.get("policy", ""), mode)
    findings += padding_findings(t["padding"])
    findings += timing_findings(timing_summary(t["steps"], t["layers"]))
    findings += path_findings(path_checks(t["events"]), str(run.meta.get("backend", "")))
    findings += engine_log_findings(engine_starts(t["events"], run.meta.get("imported_from")))
    findings += route_findings(route_summary(run.meta), sc.get("policy", ""))
    findings += reservation_findings(reservation_summary(sc))
    if imp:
        mark_unreliable(findings, imp)
    findings.sort(key=lambda f: f.rank)
    return findings


def summary(run: Run, shadow: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything ``mlaprof report --json`` prints (one JSON object)."""
    sc = _scenario(run)
    t = _load(run)
    engine, engine_shadow, _ = engine_analysis(run.meta, t["events"], **(shadow or {}))
    syncs = t["syncs"]
    splits = split_summary(t["splits"])
    blocking = syncs[syncs["kind"] == "sync"] if not syncs.empty else syncs
    starts = engine_starts(t["events"], run.meta.get("imported_from"))
    capture = _capture(run, t)
    if starts and not sc and engine is None:  # an imported vLLM log: what the log says
        capture = log_capture(starts)
    if "imported" in t:  # an imported trace: the verdict its own evidence supports
        capture = t["imported"]["capture"]
    doc = {
        "run": run.name,
        "status": run.status,
        "scenario": sc,
        "backend": run.meta.get("backend"),
        "device": run.meta.get("device"),
        "ranks": run.ranks,
        "syncs": [
            {
                "layer": _int(r.layer),
                "step": _int(r.step),
                "op": r.op,
                "location": r.location,
                "function": r.function,
            }
            for r in blocking.itertuples()
        ],
        "allocations": [
            {"layer": _int(r.layer), "op": r.op, "location": r.location}
            for r in (syncs[syncs["kind"] == "alloc"] if not syncs.empty else syncs).itertuples()
        ],
        "route": route_summary(run.meta),
        "splits": [
            {
                "policy": r.policy,
                "source": _policy_field(r.policy, "provenance"),
                "verified": _policy_field(r.policy, "verified"),
                "on_device": _policy_field(r.policy, "on_device"),
                "used": _int(r.used),
                "deserved": _int(r.deserved),
                "frozen": _int(r.frozen),
                "all_rows": _int(r.all_rows),
                "active_rows": _int(r.active_rows),
                "min_kv_used": _int(r.min_kv_used),
                "min_kv_deserved": _int(r.min_kv_deserved),
                "occupancy": _float(r.occupancy_used),
                "occupancy_deserved": _float(r.occupancy_deserved),
                "occupancy_source": "model",
                "step": _int(r.step),
            }
            for r in splits.itertuples()
        ],
        "padding": padding_summary(t["padding"]),
        "layer_splits": layer_splits(t["layers"]),
        "capture": capture,
        "trace": t.get("imported"),
        "reservation": reservation_summary(sc),
        "timing": timing_summary(t["steps"], t["layers"]),
        "paths": path_checks(t["events"]),
        "engine_starts": starts,
        "engine": engine,
        "shadow": engine_shadow,
        "findings": [f.to_dict() for f in analyze(run, t, shadow)],
    }
    doc["headline"] = headline(doc, run.meta)
    return doc


def _policy_field(name: str, attr: str) -> Any:
    from mlaprof.splits.policies import POLICIES

    p = POLICIES.get(name)
    return None if p is None else getattr(p, attr)


def layer_splits(layers: Any) -> list[dict[str, int | None]]:
    """``[{splits, records}]``: how many layer records ran with each S (the S an imported trace
    shows per MLA layer; ``None`` where the trace does not say)."""
    if layers.empty:
        return []
    counts = layers["splits_used"].value_counts(dropna=False)
    rows = [{"splits": _int(v), "records": int(n)} for v, n in counts.items()]
    return sorted(rows, key=lambda r: (r["splits"] is None, r["splits"] or 0))


def _int(v: Any) -> int | None:
    try:
        return None if v is None or v != v else int(v)
    except (TypeError, ValueError):
        return None


def _float(v: Any) -> float | None:
    try:
        return None if v is None or v != v else float(v)
    except (TypeError, ValueError):
        return None

"""The facade over the analyzers (one per question, DESIGN.md). ``collect`` turns the run into
typed evidence with the adapter of its kind (:mod:`mlaprof.analysis.evidence`); every analyzer
reads only that evidence; :class:`RunSummary` holds what they return and ``to_json()`` is the
report's JSON object, which every view renders.

``analyze(run)`` returns the findings sorted by severity; ``summary(run)`` the JSON object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.capture import capture_findings
from mlaprof.analysis.coverage import coverage_findings
from mlaprof.analysis.engine import engine_analysis
from mlaprof.analysis.engine_log import engine_log_findings
from mlaprof.analysis.evidence import Evidence, collect
from mlaprof.analysis.findings import fold_ranks
from mlaprof.analysis.headline import headline
from mlaprof.analysis.imported import imported_findings, mark_unreliable
from mlaprof.analysis.layers import layer_table
from mlaprof.analysis.padding import padding_findings, padding_summary
from mlaprof.analysis.paths import (
    path_checks,
    path_findings,
    pre_fix_rule,
    route_findings,
    route_summary,
)
from mlaprof.analysis.ranks import fleet_summary
from mlaprof.analysis.reservation import reservation_findings, reservation_summary
from mlaprof.analysis.series import Series, build_series
from mlaprof.analysis.splits import replayed_splits, split_findings, split_rows
from mlaprof.analysis.syncs import sync_counts, sync_findings, sync_rows
from mlaprof.analysis.timing import timing_findings, timing_summary
from mlaprof.errors import MlaprofError
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.store.reader import Run

# version of the summary's JSON shape: 2 added kind, device, sync_counts, h2d_copies,
# capture_errors, layers, fleet and the capture's one vocabulary (text, label, why)
SUMMARY_SCHEMA = 2


@dataclass
class RunSummary:
    """Everything the views show about one run, computed once."""

    run: str
    status: str
    kind: str
    scenario: dict[str, Any]
    backend: Any
    device: str
    ranks: list[int]
    capture: dict[str, Any]
    syncs: list[dict[str, Any]]
    allocations: list[dict[str, Any]]
    h2d_copies: list[dict[str, Any]]
    capture_errors: list[dict[str, Any]]
    sync_counts: dict[str, Any]
    route: dict[str, Any] | None
    splits: list[dict[str, Any]]
    padding: dict[str, Any]
    layers: list[dict[str, Any]]
    layer_splits: list[dict[str, Any]]
    fleet: dict[str, Any]
    trace: dict[str, Any] | None
    reservation: list[dict[str, Any]]
    timing: dict[str, Any]
    paths: list[dict[str, Any]]
    engine_starts: list[dict[str, Any]]
    engine: dict[str, Any] | None
    shadow: dict[str, Any] | None
    # the S a FULL graph replayed, measured (None: no measured replay; see splits.frozen)
    replayed_splits: dict[str, Any] | None = None
    # what the figures draw, per rank (mlaprof.analysis.series; owned by the figures' helper)
    series: Series | None = None
    findings: list[Finding] = field(default_factory=list)
    headline: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        # the sections as they are (plain dicts and lists): a deep copy of a fleet's per-step
        # sections cost half a second and bought nothing, the summary is built once per call
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["findings"] = [f.to_dict() for f in self.findings]
        doc["series"] = self.series.to_json() if self.series is not None else None
        doc["schema_version"] = SUMMARY_SCHEMA
        return doc


def _route(ev: Evidence, shadow: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verify path vLLM takes: the scenario's, or for an engine run the route its shadow
    analysis modelled for the recorded batches (one route per run: the most common)."""
    r = route_summary(ev.meta)
    if r is None and ev.kind is RunKind.ENGINE and shadow and shadow.get("paths"):
        paths = shadow["paths"]
        path = max(paths, key=lambda p: paths[p])
        r = {
            "path": path,
            "kernel": ", ".join(shadow.get("policies") or []),
            "reason": (
                f"modelled for the recorded verify batches on {shadow.get('device')} with aiter "
                f"{shadow.get('aiter')} ({sum(paths.values())} steps: "
                + ", ".join(f"{p} x{n}" for p, n in paths.items())
                + ")"
            ),
            "version": "as recorded",
            "verified": True,
            "source": "shadow analysis of the engine's own batches",
        }
    return r


def analyze(
    run: Run, evidence: Evidence | None = None, shadow: dict[str, str] | None = None
) -> list[Finding]:
    """Findings sorted by severity. ``shadow``: {"device": ..., "aiter": ...} for a recorded
    engine's modelled AITER view (defaults: mlaprof.analysis.engine.SHADOW_*)."""
    ev = evidence if evidence is not None else collect(run)
    found = engine_analysis(ev.meta, ev.tables["events"], **(shadow or {}))[2]
    return _findings(ev, found, _sections(ev))


def _sections(ev: Evidence) -> dict[str, Any]:
    """The summary sections the findings are drawn from, computed once for both."""
    t = ev.tables
    return {
        # torch's CPU threads the steps ran with (None: not recorded, e.g. an imported trace)
        "timing": {**timing_summary(t["steps"], t["layers"]), "threads": ev.meta.get("threads")},
        "paths": path_checks(t["events"]),
        "reservation": reservation_summary(ev.scenario),
        "replayed_splits": replayed_splits(t["steps"], t["layers"]),
    }


def _findings(ev: Evidence, engine_found: list[Finding], sec: dict[str, Any]) -> list[Finding]:
    t, sc, mode = ev.tables, ev.scenario, ev.graph_mode
    findings: list[Finding] = []
    findings += capture_findings(ev.capture, t["captures"], t["memory"])
    if ev.trace is not None:
        if ev.step_stats is None:
            raise MlaprofError("internal: a trace's evidence without its per-step aggregates")
        findings += imported_findings(ev.meta, t, ev.trace, ev.step_stats)
        findings += coverage_findings(ev.trace["coverage"])
    findings += engine_found
    findings += sync_findings(t["syncs"], mode)
    findings += split_findings(
        t["splits"], sc.get("policy", ""), mode, pre_fix_rule(sc), sec["replayed_splits"]
    )
    findings += padding_findings(t["padding"])
    findings += timing_findings(sec["timing"])
    findings += path_findings(sec["paths"], str(ev.meta.get("backend", "")))
    findings += engine_log_findings(ev.starts)
    findings += route_findings(route_summary(ev.meta), sc.get("policy", ""))
    findings += reservation_findings(sec["reservation"])
    if ev.trace is not None:
        mark_unreliable(findings, ev.trace)
    findings = fold_ranks(findings, len(ev.ranks))
    findings.sort(key=lambda f: f.rank)
    return findings


def build_summary(run: Run, shadow: dict[str, str] | None = None) -> RunSummary:
    """The typed summary of a run: evidence once, every analyzer once."""
    ev = collect(run)
    t = ev.tables
    engine, engine_shadow, engine_found = engine_analysis(ev.meta, t["events"], **(shadow or {}))
    syncs = t["syncs"]
    layers = layer_table(t["layers"], syncs, ev.reference)
    sec = _sections(ev)
    s = RunSummary(
        run=ev.name,
        status=ev.status,
        kind=str(ev.kind),
        scenario=ev.scenario,
        backend=ev.meta.get("backend"),
        device=ev.device,
        ranks=ev.ranks,
        capture=ev.capture,
        syncs=sync_rows(syncs, "sync"),
        allocations=sync_rows(syncs, "alloc"),
        h2d_copies=sync_rows(syncs, "h2d"),
        capture_errors=sync_rows(syncs, "capture-error"),
        sync_counts=sync_counts(syncs, t["layers"]),
        route=_route(ev, engine_shadow),
        splits=split_rows(t["splits"]),
        padding=padding_summary(t["padding"]),
        layers=layers,
        layer_splits=layer_splits(t["layers"]),
        fleet=fleet_summary(
            ev.ranks,
            layers,
            ev.meta.get("rank_sources"),
            _batches(t["steps"]),
            ev.trace.get("trust_by_rank") if ev.trace else None,
        ),
        trace=ev.trace,
        reservation=sec["reservation"],
        timing=sec["timing"],
        paths=sec["paths"],
        engine_starts=ev.starts,
        engine=engine,
        shadow=engine_shadow,
        replayed_splits=sec["replayed_splits"],
        findings=_findings(ev, engine_found, sec),
        series=build_series(ev, layers, engine_shadow, run),
    )
    # the headline reads the sections as they are (no JSON copy of a fleet's trace sections)
    s.headline = headline(vars(s), ev)
    return s


def summary(run: Run, shadow: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything ``mlaprof report --json`` prints (one JSON object)."""
    return build_summary(run, shadow).to_json()


def _batches(steps: Any) -> dict[int, tuple[Any, ...]]:
    """Per rank, its batch rows step by step (the signature DP groups are told apart by)."""
    if steps.empty or steps["num_reqs"].isna().all():
        return {}
    st = steps.sort_values(["rank", "step"])
    return {
        int(r): tuple(None if v != v else int(v) for v in g["num_reqs"])
        for r, g in st.groupby("rank")
    }


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

"""The facade over the analyzers (one per question, DESIGN.md). ``collect`` turns the run into
typed evidence with the adapter of its kind (:mod:`mlaprof.analysis.evidence`); every analyzer
reads only that evidence; :class:`RunSummary` holds what they return and ``to_json()`` is the
report's JSON object, which every view renders.

``analyze(run)`` returns the findings sorted by severity; ``summary(run)`` the JSON object.
"""

from __future__ import annotations

import typing
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from mlaprof.analysis import sections
from mlaprof.analysis.capture import capture_findings, step_mode_findings
from mlaprof.analysis.claims import Claims, claims_of, mismatch_findings
from mlaprof.analysis.collapse import collapse_findings
from mlaprof.analysis.coverage import coverage_findings
from mlaprof.analysis.cpu_attention import cpu_findings
from mlaprof.analysis.drafter_graphs import drafter_graph_findings, drafter_graph_summary
from mlaprof.analysis.evidence import Evidence, collect
from mlaprof.analysis.findings import Finding, fold_ranks, off_route_note, on_path
from mlaprof.analysis.findings_verdict import FindingsVerdict, findings_verdict
from mlaprof.analysis.headline import headline, own_split
from mlaprof.analysis.layers import layer_table
from mlaprof.analysis.memory import capture_memory_findings
from mlaprof.analysis.padding import padding_findings, padding_summary
from mlaprof.analysis.paths import (
    path_checks,
    path_findings,
    pre_fix_rule,
    route_findings,
    route_summary,
    run_route,
)
from mlaprof.analysis.ranks import dp_group_rows, fleet_summary
from mlaprof.analysis.reservation import reservation_findings, reservation_summary
from mlaprof.analysis.run_state import run_state
from mlaprof.analysis.section_base import Section, section
from mlaprof.analysis.sections import (
    FullGraphSplits,
    Imported,
    LayerSplitCount,
    Scenario,
    Source,
)
from mlaprof.analysis.served import served_analysis
from mlaprof.analysis.server_starts import start_findings
from mlaprof.analysis.splits import (
    frozen_condition,
    frozen_rule,
    grid_caps,
    replayed_splits,
    split_findings,
    split_rows,
    split_summary,
    what_if_rule,
)
from mlaprof.analysis.starts import log_spec_totals
from mlaprof.analysis.syncs import (
    host_sync_findings,
    layer_syncs,
    sync_counts,
    sync_findings,
    sync_rows,
)
from mlaprof.analysis.timing import timing_findings, timing_summary
from mlaprof.analysis.trust import mark_unreliable, trust_findings
from mlaprof.analysis.typed_json import from_json, to_json
from mlaprof.analysis.variants import variant_findings
from mlaprof.scenario import set_settings
from mlaprof.store.liveness import RunStatus
from mlaprof.store.runkind import RunKind  # noqa: TC001 (a field type get_type_hints resolves)

if TYPE_CHECKING:
    import pandas as pd

    from mlaprof.analysis.evidence.model import RunMeta
    from mlaprof.analysis.sections import (
        Capture,
        DpGroup,
        EngineSection,
        EngineStart,
        Fleet,
        HeadlineRow,
        LayerRow,
        Padding,
        PathCheck,
        ReplayedSplits,
        Reservation,
        Route,
        RunState,
        ShadowSection,
        SpecDecoding,
        SplitStep,
        SyncCounts,
        SyncRecord,
        Timing,
        TraceSection,
    )
    from mlaprof.analysis.series import Series
    from mlaprof.store.reader import Run

# version of the summary's JSON shape: 2 added kind, device, sync_counts, h2d_copies,
# capture_errors, layers, fleet and the capture's one vocabulary (text, label, why); 3 added
# state, imported, log_spec, dp_groups and full_graph_splits (docs/evidence.md)
SUMMARY_SCHEMA = 3


@section
class RunSummary(Section):
    """Everything the views show about one run, computed once, typed section by section
    (:mod:`mlaprof.analysis.sections`). ``to_json()`` is the ``report --json`` document."""

    run: str
    status: RunStatus
    kind: RunKind
    scenario: Scenario  # empty for a run without a scenario (an import)
    backend: str | None
    device: str
    ranks: list[int]
    capture: Capture
    syncs: list[SyncRecord]
    allocations: list[SyncRecord]
    h2d_copies: list[SyncRecord]
    capture_errors: list[SyncRecord]
    sync_counts: SyncCounts
    route: Route | None
    splits: list[SplitStep]  # modelled per step and policy
    padding: Padding
    layers: list[LayerRow]
    layer_splits: list[LayerSplitCount]
    fleet: Fleet
    trace: TraceSection | None  # an imported trace's own analysis
    reservation: list[Reservation]
    timing: Timing
    paths: list[PathCheck]
    engine_starts: list[EngineStart]
    engine: EngineSection | None
    shadow: ShadowSection | None
    # the S a FULL graph replayed, measured (None: no measured replay; see splits.frozen)
    replayed_splits: ReplayedSplits | None
    findings: list[Finding]
    headline: list[HeadlineRow]
    # schema 3: where the run stands, where an import came from, a log's spec decoding in total
    state: RunState
    imported: Imported | None
    log_spec: SpecDecoding | None
    dp_groups: list[DpGroup]  # the fleet per data-parallel group (one row for a single rank)
    full_graph_splits: FullGraphSplits
    # what the findings list says as a whole: the line every view prints under an empty list
    # ("OK" only where the evidence it names was there; "UNKNOWN" with what is missing)
    findings_verdict: FindingsVerdict
    # what the figures draw, per rank (mlaprof.analysis.series): built with the summary, not
    # part of the report --json document (None for a summary read back from that document)
    series: Series | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {f.name: to_json(getattr(self, f.name)) for f in fields(self) if f.name != "series"}
        doc["findings"] = [f.to_dict() for f in self.findings]
        doc["schema_version"] = SUMMARY_SCHEMA
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunSummary:
        """The typed summary of a ``report --json`` document (what :meth:`to_json` wrote): the
        one place a summary is read back from JSON (the build path constructs its sections)."""
        hints = typing.get_type_hints(cls, localns=type_names())
        kw = {
            f.name: from_json(hints[f.name], doc[f.name], f.name)
            for f in fields(cls)
            if f.name not in ("findings", "series") and (f.name in doc or f.name not in DERIVED)
        }
        found = [Finding(**f) for f in doc.get("findings") or []]
        if "findings_verdict" not in kw:  # a document written before it: from its own sections
            kw["findings_verdict"] = findings_verdict(
                found,
                kw["splits"],
                kw["trace"],
                kw["shadow"],
                kw["capture"],
                kw["padding"],
                kw["sync_counts"],
            )
        return cls(**kw, findings=found)


# fields a document written before them lacks, made again from its other sections
DERIVED = frozenset({"findings_verdict"})


def type_names() -> dict[str, Any]:
    """The names RunSummary's field types are written with (its ``series`` type's module is
    imported here, not with this one: a summary without the figures never needs it)."""
    from mlaprof.analysis.series import Series

    return {**vars(sections), "Series": Series}


def analyze(
    run: Run, evidence: Evidence | None = None, shadow: dict[str, str] | None = None
) -> list[Finding]:
    """Findings sorted by severity. ``shadow``: {"device": ..., "aiter": ...} for a recorded
    engine's modelled AITER view (defaults: mlaprof.analysis.shadow.SHADOW_*)."""
    ev = evidence if evidence is not None else collect(run)
    found = served_analysis(
        ev.engine_steps, ev.acceptance, rules=ev.scheduler_rules, **(shadow or {})
    )[2]
    return _findings(ev, found, _sections(ev, route_summary(ev.meta)))


@section
class _Sections(Section):
    """The summary sections the findings are drawn from, computed once for both."""

    timing: Timing
    paths: list[PathCheck]
    reservation: list[Reservation]
    replayed_splits: ReplayedSplits | None
    # the worst step per rank and policy (analysis.splits.split_summary, a frame): the splits
    # section's rows and findings read it
    split_worst: pd.DataFrame


def _sections(ev: Evidence, route: Route | None) -> _Sections:
    """The sections every builder below reads; ``route``: the one the findings judge by."""
    t = ev.tables
    return _Sections(
        # torch's CPU threads the steps ran with (None: not recorded, e.g. an imported trace)
        timing=timing_summary(
            t["steps"],
            t["layers"],
            ev.meta.threads,
            ev.provenance.detail if ev.provenance.how == "measured" else None,
        ),
        paths=path_checks(t["events"]),
        reservation=reservation_summary(ev.scenario, route),
        # the run's policy: where its kernel decides S on the device, a record holds the cap
        replayed_splits=replayed_splits(t["steps"], t["layers"], ev.scenario.policy or ""),
        split_worst=split_summary(t["splits"]),
    )


def step_durations(steps: Any) -> dict[tuple[int, int], int]:
    """(rank, step) -> duration in ns, where the step was timed."""
    if steps is None or steps.empty or "duration_ns" not in steps:
        return {}
    timed = steps.dropna(subset=["duration_ns"])
    return {
        (int(r), int(s)): int(d)
        for r, s, d in zip(timed["rank"], timed["step"], timed["duration_ns"], strict=True)
    }


def _findings(
    ev: Evidence,
    engine_found: list[Finding],
    sec: _Sections,
    claims: Claims | None = None,
    route: Route | None = None,
) -> list[Finding]:
    t, sc, mode = ev.tables, ev.scenario, ev.graph_mode
    # what the run can claim (capture verdict, route, kind, device): every builder below that
    # could contradict it asks it (mlaprof.analysis.claims)
    cl = claims if claims is not None else claims_of(ev)
    # the route the findings judge by (the splits rows' too: the caller's, where it holds it)
    route = route if route is not None else route_summary(ev.meta)
    findings: list[Finding] = []
    findings += capture_findings(ev.capture, t["captures"])
    findings += capture_memory_findings(ev.capture, t["memory"], cl.capture_succeeded)
    findings += trust_findings(ev.trust, ev.rank_trust)
    findings += collapse_findings(ev.meta.trace_checks, ev.meta.origin, t["steps"], ev.step_stats)
    findings += variant_findings(ev.meta.origin, ev.kernel_paths)
    findings += step_mode_findings(ev.step_modes, len(ev.ranks))
    findings += cpu_findings(ev.cpu)
    findings += host_sync_findings(ev.host_syncs, len(ev.ranks))
    findings += coverage_findings(ev.coverage, cl.has_grid)
    findings += engine_found
    findings += drafter_graph_findings(
        drafter_graph_summary(t["events"], ev.engine_steps, step_durations(t["steps"]))
    )
    findings += sync_findings(t["syncs"], mode, t["layers"])
    findings += split_findings(
        t["splits"],
        sc.policy or "",
        mode,
        pre_fix_rule(sc),
        sec.replayed_splits,
        sec.split_worst,
        claims=cl,
        route=route,
    )
    findings += padding_findings(t["padding"])
    findings += timing_findings(sec.timing)
    findings += path_findings(sec.paths, ev.meta.backend or "")
    findings += start_findings(ev.starts)
    findings += route_findings(route, sc.policy or "")
    findings += mismatch_findings(cl, route)
    findings += reservation_findings(sec.reservation)
    # a backend off its vLLM route (the legacy flat demo): its syncs and capture hold on its path
    if route is not None and cl.backend and cl.backend_mismatch(route):
        on_path(findings, off_route_note(cl.backend, route.path, route.version))
    mark_unreliable(findings, ev.trust, ev.rank_trust)
    findings = fold_ranks(findings, len(ev.ranks))
    findings.sort(key=lambda f: f.rank)
    return findings


def require_summary(x: Any, what: str) -> RunSummary:
    """``x`` if it is a run summary with its figures' series; otherwise one clear error: a view
    renders the summary it is given, it never builds one (:func:`build_summary`)."""
    from mlaprof.errors import MlaprofError

    if isinstance(x, RunSummary) and x.series is not None:
        return x
    raise MlaprofError(
        f"{what} renders a run summary: pass build_summary(run) "
        f"(mlaprof.analysis.run_summary), not a {type(x).__name__}"
    )


def build_summary(
    run: Run, shadow: dict[str, str] | None = None, series: bool = True
) -> RunSummary:
    """The typed summary of a run: evidence once, every analyzer once. A caller builds it once
    and hands it to every view (:mod:`mlaprof.reporters.renderer`); no view builds its own.
    ``series=False``: without the figures' series (``series`` None), for a caller whose views
    draw no figure (the JSON document, the terminal and Markdown reports, the diff): a fleet's
    per-rank timelines are about a third of its report's time."""
    return _build(run, shadow, series)


def _build(run: Run, shadow: dict[str, str] | None, with_series: bool = True) -> RunSummary:
    ev = collect(run)
    t = ev.tables
    claims = claims_of(ev)
    engine, engine_shadow, engine_found = served_analysis(
        ev.engine_steps, ev.acceptance, rules=ev.scheduler_rules, **(shadow or {})
    )
    syncs = t["syncs"]
    # one sync count: the layer rows read it where no probe counted them (a trace's host check)
    counts = sync_counts(syncs, t["layers"], ev.host_syncs, t["steps"])
    # the layer records whose S the device decided hold the grid's cap (one rule: grid_caps)
    capped = grid_caps(t["steps"], t["layers"], ev.scenario.policy or "")
    layers = layer_syncs(layer_table(t["layers"], syncs, ev.reference, capped), counts)
    # the route the split findings judge by: a policy off it keeps its frozen S as a what-if
    judged = route_summary(ev.meta)
    sec = _sections(ev, judged)
    scenario = ev.scenario
    # one rule for where a modelled frozen S stands: the table, the headline, full_graph_splits
    stands = frozen_rule(scenario.policy or "", claims.full_graph, sec.replayed_splits)
    # and the condition it holds on, said beside it in every view (a capture nothing decided)
    frozen_if = frozen_condition(claims.capture_status)
    splits = split_rows(t["splits"], sec.split_worst, stands, frozen_if, judged)
    padding = padding_summary(t["padding"])
    fleet = fleet_summary(
        ev.ranks,
        layers,
        ev.meta.rank_sources,
        _batches(t["steps"]),
        ev.trust_by_rank,
        ev.engines,
        ev.meta.format or ev.meta.source,
        imported=ev.meta.imported,
    )
    findings = _findings(ev, engine_found, sec, claims, judged)
    return RunSummary(
        run=ev.name,
        status=RunStatus(ev.status),
        kind=ev.kind,
        scenario=set_settings(scenario),
        backend=ev.meta.backend,
        device=ev.device,
        ranks=ev.ranks,
        capture=ev.capture,
        syncs=sync_rows(syncs, "sync"),
        allocations=sync_rows(syncs, "alloc"),
        h2d_copies=sync_rows(syncs, "h2d"),
        capture_errors=sync_rows(syncs, "capture-error"),
        sync_counts=counts,
        route=run_route(ev.meta, engine_shadow, claims),
        splits=splits,
        padding=padding,
        layers=layers,
        layer_splits=layer_splits(t["layers"], capped),
        fleet=fleet,
        trace=ev.trace,
        reservation=sec.reservation,
        timing=sec.timing,
        paths=sec.paths,
        engine_starts=ev.starts,
        engine=engine,
        shadow=engine_shadow,
        replayed_splits=sec.replayed_splits,
        findings=findings,
        # the headline reads the sections as the analyzers returned them
        headline=headline(
            ev,
            splits=splits,
            scenario=scenario,
            replayed=sec.replayed_splits,
            padding=padding,
            timing=sec.timing,
            fleet=fleet,
            engine_starts=ev.starts,
        ),
        state=run_state(ev.status, run.reason, t["steps"], ev.ranks),
        imported=_imported(ev.meta),
        log_spec=log_spec_totals(ev.starts) if ev.starts else None,
        dp_groups=dp_group_rows(fleet.per_rank),
        full_graph_splits=_full_graph_splits(splits, scenario, sec.replayed_splits),
        findings_verdict=findings_verdict(
            findings, splits, ev.trace, engine_shadow, ev.capture, padding, counts
        ),
        # the figures' section, from the same evidence and the analyzers' own layer table and
        # shadow (None for a caller whose views draw no figure)
        series=_series(
            ev,
            layers,
            engine_shadow,
            run,
            sec.timing,
            stands,
            frozen_if,
            what_if=what_if_rule(judged),
        )
        if with_series
        else None,
    )


def _series(*args: Any, **kwargs: Any) -> Series:
    """The figures' series (:func:`mlaprof.analysis.series.build_series`), imported only by a
    caller that draws figures (~0.02 s of a small run's report)."""
    from mlaprof.analysis.series import build_series

    return build_series(*args, **kwargs)


def _full_graph_splits(
    splits: list[SplitStep], scenario: Scenario, measured: ReplayedSplits | None
) -> FullGraphSplits:
    """The S a FULL graph replays: measured where its replays were, else the S the dummy-run
    capture would freeze (modelled, the run's own policy) where that stands in this run
    (``splits``' frozen S, :func:`mlaprof.analysis.splits.frozen_stands`)."""
    own = own_split(splits, scenario.policy)
    modelled = None if own is None else own.frozen
    # a grid's cap (S decided on the device per replay) is no S the graph replays
    measured = measured if measured is not None and measured.holds_s else None
    source = (
        Source.MEASURED
        if measured is not None
        else Source.MODELLED
        if modelled is not None
        else None
    )
    return FullGraphSplits(
        # beside a graph's S only: where no graph's S stands (a failed capture, no FULL graph)
        # the section is absent, never "S a captured graph replays: used 16"
        used=None if own is None or source is None else own.used,
        measured_min=None if measured is None else measured.min,
        measured_max=None if measured is None else measured.max,
        modelled=modelled,
        source=source,
        # the modelled S's condition, as its splits row says it (a capture nothing decided)
        modelled_if=None if own is None or modelled is None else own.frozen_if,
        # the run's policy off its route: a what-if, as its splits row says it
        modelled_what_if=None if own is None or modelled is None else own.frozen_what_if,
    )


def _imported(meta: RunMeta) -> Imported | None:
    if not meta.imported or meta.imported_from is None:
        return None
    return Imported(
        imported_from=meta.imported_from,
        format=meta.format or meta.source,
        device_source=meta.device_source,
        not_read=list(meta.not_read) or None,
    )


def summary(run: Run, shadow: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything ``mlaprof report --json`` prints (one JSON object)."""
    return build_summary(run, shadow, series=False).to_json()


def _batches(steps: Any) -> dict[int, tuple[Any, ...]]:
    """Per rank, its batch rows step by step (the signature DP groups are told apart by)."""
    if steps.empty or steps["num_reqs"].isna().all():
        return {}
    st = steps.sort_values(["rank", "step"])
    return {
        int(r): tuple(None if v != v else int(v) for v in g["num_reqs"])
        for r, g in st.groupby("rank")
    }


def layer_splits(layers: Any, capped: Any = None) -> list[LayerSplitCount]:
    """How many layer records ran with each S (the S an imported trace shows per MLA layer;
    ``None`` where the trace does not say); ``capped`` (per record, from
    :func:`mlaprof.analysis.splits.grid_caps`): records whose S the device decided, counted
    per grid cap (``S_grid_cap``, their S None: no S any row ran with)."""
    if layers.empty:
        return []
    own = layers if capped is None else layers[~capped]
    counts = own["splits_used"].value_counts(dropna=False)
    rows = [LayerSplitCount(splits=_int(v), records=int(n)) for v, n in counts.items()]
    if capped is not None and capped.any():
        caps = layers.loc[capped, "splits_used"].value_counts(dropna=False)
        rows += [LayerSplitCount(splits=None, records=int(n), S_grid_cap=_int(v))
                 for v, n in caps.items()]  # fmt: skip
    return sorted(rows, key=lambda r: (r.splits is None, r.splits or 0, r.S_grid_cap or 0))


def _int(v: Any) -> int | None:
    try:
        return None if v is None or v != v else int(v)
    except (TypeError, ValueError):
        return None

"""The view model: the fields of one frame of the dashboard (and ``--once``), picked from a
:class:`mlaprof.analysis.live.LiveSummary` (the run's summary, provisional or full).

Nothing here computes a number: every value is a summary field, or a row as recorded, picked
for the selected rank and step. Ranks are never merged: "all ranks" lists each rank's rows (a
rank column) and the per-rank counts with the ranks behind them. The summary's sections are
read in this one module, so a change of their shape changes only here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlaprof.analysis.diff import backend_text
from mlaprof.analysis.sections import NO_STEPS, NO_TIMED_STEP
from mlaprof.analysis.timing import TIMING_SHORT, timing_label
from mlaprof.rank_counts import per_rank_count, rank_list, ranks_of
from mlaprof.store.runkind import RunKind, run_kind

if TYPE_CHECKING:
    from mlaprof.analysis.findings import Finding
    from mlaprof.analysis.live import LiveSummary, StepSeries
    from mlaprof.analysis.run_summary import RunSummary
    from mlaprof.analysis.sections import (
        Capture,
        HeadlineRow,
        LayerRow,
        Padding,
        SplitStep,
        Timing,
        TraceSyncs,
    )

ANALYSING = "analysing..."
FULL = "mlaprof.analysis"
PROVISIONAL = "mlaprof.analysis, provisional: the rows committed so far"


# -- view model ------------------------------------------------------------------------------
@dataclass
class Selection:
    """What the user picked on the dashboard: rank (None: all), step (index into the run's
    steps; None: all steps), layer-table sort. Shared by the dashboard and the layer screen."""

    rank: int | None = None
    step_index: int | None = None
    layer_sort: tuple[str, bool] = ("layer", False)


@dataclass
class View:
    """Everything one frame of the dashboard shows, for the selected rank (or every rank)."""

    name: str
    scenario: str  # the scenario's name, or the source an import or engine record came from
    origin: str  # what ``scenario`` is: "scenario", "imported from", "recorded from"
    device: str
    backend: str
    status: str
    rank_label: str
    ranks: list[int]
    graph_mode: str
    capture: str
    steps_text: str  # steps per rank, with the ranks behind each count
    events: int
    latency_ms: list[float]
    latency: list[tuple[str, float | None]]  # last, p50, p90, min, max (ms)
    latency_scope: str  # "rank 0 of 8" where several ranks are shown, else ""
    step_median: str  # the analysis' median step (per rank where ranks differ)
    # the analysis' sync verdict ("not checked (...)" apart from "0 on N layer(s)")
    sync_text: str
    layers: list[LayerRow]  # the analysis' rows of the shown ranks, in the selected order
    layer_scope: str  # "all steps" or "step N"
    per_rank_layers: bool  # several ranks shown: each row is one rank's
    splits: list[SplitStep]  # the shown ranks' rows (ranks that agree share one)
    padding: Padding | None
    syncs: list[Site]
    findings: list[Finding]
    findings_source: str  # FULL, PROVISIONAL, or why no summary is shown yet
    headline: list[HeadlineRow]  # the analysis' key numbers (capture, memory, S, padding)
    provisional: bool = False
    capture_failed: bool = False  # the analysis' capture status says no FULL graph
    timing_label: str = ""  # how step times were measured (CPU reference timing, graph replay)
    timing_short: str = ""  # the same in a word or two (CPU ref, replay)
    policy: str = ""
    problem: str | None = None
    # the summary itself: engine runs, imported traces and logs, the ranks side by side and
    # every section are shown through the rows layer (mlaprof.reporters.rows)
    summary: RunSummary | None = None
    step_ids: list[int] = field(default_factory=list)
    steps_by_rank: dict[int, int] = field(default_factory=dict)  # committed steps, shown ranks
    # False until the analysis told the run's steps apart (an imported trace's warm-ups and
    # drafter passes): no count is shown, ``steps_text`` says "analysing..."
    steps_decided: bool = True
    # an imported trace's host-sync check, which counted its layers' syncs (no site recorded):
    # the layer drill-down's verdict says what counted them (analysis.step_syncs.layer_verdict)
    host_syncs: TraceSyncs | None = None

    @property
    def steps(self) -> int:
        """The most steps any shown rank committed (``steps_text`` names each rank's)."""
        return max(self.steps_by_rank.values(), default=0)


def build_view(
    live: LiveSummary | None,
    rank: int | None = None,
    step_layers: list[LayerRow] | None = None,
    step: int | None = None,
    problem: str | None = None,
    layer_sort: tuple[str, bool] = ("layer", False),
    name: str = "?",
    status: str = "waiting",
) -> View:
    """One frame: ``live`` picked for ``rank`` (None: every rank) and, where ``step_layers`` is
    given, the layer rows of ``step`` (:meth:`mlaprof.analysis.live.LiveFold.step_layers`).
    ``status``: the run's status while no summary is in (the live fold's: a run without
    records reads starting, failed or abandoned, as the reader judges it)."""
    if live is None:
        return _waiting(name, problem, status)
    s = live.summary
    meta = live.meta
    scen = meta.get("scenario") if isinstance(meta.get("scenario"), dict) else {}
    ranks = live.ranks
    shown = [r for r in ranks if rank is None or r == rank]

    def mine(rows: list[Any] | None) -> list[Any]:
        return [r for r in rows or [] if rank is None or _has_rank(r, rank)]

    source = ANALYSING if s is None else PROVISIONAL if live.provisional else FULL
    if s is None and live.note:
        source = live.note
    series = live.series.get(rank if rank is not None else min(ranks, default=0))
    counts = _f(s, "sync_counts")
    layers = list(step_layers if step_layers is not None else mine(_f(s, "layers")))
    key, rev = layer_sort
    layers.sort(key=lambda r: (_sort_key(getattr(r, key)), _sort_key(r.rank)), reverse=rev)
    timing, capture = _f(s, "timing"), _f(s, "capture")
    imported = _f(s, "imported")  # where the analysis says an import came from, as the report
    return View(
        # the run's folder name, as the report, runs and exports name it (a copied run's
        # run.json still holds the name it was recorded under)
        name=name if name != "?" else str(s.run if s is not None else meta.get("name") or name),
        scenario=imported.text
        if imported
        else str(scen.get("name") or meta.get("source") or "unknown"),
        origin=ORIGIN_WORDS[RunKind.TRACE] if imported else ORIGIN_WORDS[run_kind(meta)],
        device=str(_f(s, "device") or meta.get("device") or "unknown"),
        backend=backend_text(s) if s is not None else _text(meta.get("backend")),
        status=live.status,
        rank_label=_rank_label(ranks, rank),
        ranks=ranks,
        graph_mode=_graph_mode(capture, scen.get("graph_mode")),
        capture=capture.text if capture else source,
        # the steps the report counts (analysis.live.verify_steps), or none until it decided
        steps_text=_steps_text(live.step_ids, shown) if live.steps_decided else ANALYSING,
        # the shown ranks' records (every rank's where none is picked)
        events=sum(live.rows.values()) if rank is None else live.rank_rows.get(rank, 0),
        latency_ms=list(series.values_ms) if series else [],
        latency=_latency(series),
        latency_scope=ranks_of([series.rank], len(shown)) if series and len(shown) > 1 else "",
        step_median=_step_median(timing, rank, source),
        sync_text=counts.text if counts else source,
        layers=layers,
        layer_scope=f"step {step}"
        if step_layers is not None
        else _layer_steps(layers, max((len(live.step_ids.get(r, ())) for r in shown), default=0)),
        per_rank_layers=len(shown) > 1,
        splits=mine(_f(s, "splits")),
        padding=_f(s, "padding"),
        syncs=_sites(s, rank),
        findings=sorted(_f(s, "findings") or [], key=lambda f: f.rank),
        findings_source=source,
        headline=list(_f(s, "headline") or []),
        provisional=live.provisional,
        capture_failed=bool(capture and capture.no_full_graph),
        timing_label=timing.timing_label if timing else timing_label(series and series.timing),
        timing_short=TIMING_SHORT.get(
            str(timing.timing if timing else series and series.timing), ""
        ),  # fmt: skip
        policy=str(scen.get("policy") or ""),
        problem=problem,
        summary=s,
        step_ids=list(live.step_ids.get(rank if rank is not None else min(ranks, default=0), ())),
        steps_by_rank={r: len(live.step_ids.get(r, ())) for r in shown}
        if live.steps_decided
        else {},
        steps_decided=live.steps_decided,
        host_syncs=_host_syncs(s),
    )


# -- the summary's sections (the one place that reads their shape) -----------------------------
def _f(s: Any, name: str) -> Any:
    return None if s is None else getattr(s, name, None)


def _host_syncs(s: Any) -> TraceSyncs | None:
    """The trace's host-sync check where it counted (a trace's layers hold no probe count, so
    its check is the sync count: :func:`mlaprof.analysis.syncs.counted_by_host`)."""
    from mlaprof.analysis.syncs import HOST_COUNTED

    host = _f(_f(s, "trace"), "syncs")
    return host if host is not None and host.status in HOST_COUNTED else None


def _has_rank(row: Any, rank: int) -> bool:
    ranks = getattr(row, "ranks", None)
    return rank in ranks if ranks else getattr(row, "rank", None) == rank


@dataclass(frozen=True, slots=True)
class Site:
    """One sync / allocation / copy / capture-error site of a rank and layer, with the number
    of records of it (the summary lists each record)."""

    rank: int
    layer: int
    kind: str
    op: str
    location: str
    function: str
    count: int
    first_step: int


def _sites(s: Any, rank: int | None) -> list[Site]:
    """Each recorded sync / allocation / copy / capture error, as the summary lists them, with
    the number of records of the same site."""
    out: dict[tuple[Any, ...], Site] = {}
    for kind, records in (("sync", _f(s, "syncs")), ("alloc", _f(s, "allocations")),
                          ("h2d", _f(s, "h2d_copies")),
                          ("capture-error", _f(s, "capture_errors"))):  # fmt: skip
        for r in records or []:
            if rank is not None and r.rank != rank:
                continue
            k = (r.rank, r.layer, kind, r.op, r.location, r.function)
            cur = out.get(k)
            out[k] = (
                Site(r.rank, r.layer, kind, r.op, r.location, r.function, 1, r.step)
                if cur is None
                else dataclasses.replace(cur, count=cur.count + 1)
            )
    return list(out.values())


# what the header's scenario field is, by the run's kind (store.runkind): an import's source or
# an engine record's is no scenario
ORIGIN_WORDS = {
    RunKind.SCENARIO: "scenario",
    RunKind.ENGINE: "recorded from",
    RunKind.TRACE: "imported from",
    RunKind.LOG: "imported from",
}


def _layer_steps(layers: list[LayerRow], steps: int) -> str:
    """The layer table's scope: "all steps", or the steps its layer records cover where the
    run recorded layers on fewer of them (a GPU run times layers on a sample of its steps)."""
    n = max((r.steps for r in layers), default=0)
    return "all steps" if not n or n >= steps else f"{n} of {steps} steps with layer records"


def _steps_text(step_ids: dict[int, tuple[int, ...]], shown: list[int]) -> str:
    """The shown ranks' step counts as every view says a count per rank (``9 steps per rank
    (2 ranks)``, ``3-5 steps per rank (ranks 0: 5, 1: 3)``: :func:`per_rank_count`); where no
    shown rank has a step, the timing section's words for that ("no steps recorded", never
    "0 steps per rank (2 ranks)" above its "median step: no steps recorded")."""
    counts = {r: len(step_ids.get(r, ())) for r in shown}
    return NO_STEPS if counts and not any(counts.values()) else per_rank_count(counts, "step(s)")


def _graph_mode(capture: Capture | None, scenario_mode: str | None) -> str:
    """The capture section's mode that ran (:attr:`Capture.ran_text`); before a summary lands,
    the scenario's mode in run.json, said to be only the mode asked for."""
    if capture is not None:
        return capture.ran_text
    return f"unknown (asked for {scenario_mode})" if scenario_mode else "unknown"


def _rank_label(ranks: list[int], rank: int | None) -> str:
    """The ranks the dashboard shows, in the words every view names ranks with: ``ranks 0-1``
    (all of them), ``rank 1 of 2`` (one picked), ``rank 0`` (a run of one)."""
    if rank is None:
        return rank_list(ranks or [0])
    return ranks_of([rank], len(ranks)) if len(ranks) > 1 else rank_list([rank])


def _step_median(timing: Timing | None, rank: int | None, source: str) -> str:
    """The shown ranks' median step; before the analysis lands, where it stands (``source``,
    as the sync line says it); where no step was timed, the words the timing section gives its
    ``None`` (as the report's rows do), never a bare "-"."""
    if timing is None:
        return source
    if rank is not None:
        mine = [r for r in timing.per_rank if r.rank == rank]
        if mine:
            return f"{mine[0].step_median_us:.1f} µs"
    elif timing.step_median_text is not None:
        return timing.step_median_text
    return timing.none_reads("step_median_text") or NO_TIMED_STEP


def _latency(series: StepSeries | None) -> list[tuple[str, float | None]]:
    keys = ("last", "p50", "p90", "min", "max")
    return [(k, None if series is None else getattr(series, k)) for k in keys]


def _text(v: Any) -> str:
    """A recorded name, or "not recorded" (never the word None)."""
    return "not recorded" if v is None or v == "" else str(v)


def _waiting(name: str, problem: str | None, status: str = "waiting") -> View:
    return View(
        name=name, scenario="unknown", origin="scenario", device="unknown", backend="not recorded",
        status=status, rank_label=_rank_label([], None), ranks=[], graph_mode="unknown",
        capture=ANALYSING, steps_text=_steps_text({}, []), events=0, latency_ms=[],
        latency=_latency(None), latency_scope="",
        step_median=ANALYSING, sync_text=ANALYSING, layers=[],
        layer_scope="all steps", per_rank_layers=False, splits=[],
        padding=None, syncs=[], findings=[], findings_source=ANALYSING,
        headline=[], problem=problem,
    )  # fmt: skip


def _sort_key(v: Any) -> tuple[int, Any]:
    if v is None:
        return (1, 0)
    if isinstance(v, tuple):
        return (0, tuple(_sort_key(x) for x in v))
    return (0, v) if isinstance(v, (int, float)) else (0, str(v))

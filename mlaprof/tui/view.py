"""The view model: everything one frame of the dashboard (and ``--once``) shows, built from the
aggregates of :mod:`tui.aggregate` and the run's :func:`mlaprof.analysis.summary`.

Plain Python: the dashboard, ``--once`` and the benchmark share it. Findings, capture status and
the key numbers come from the analysis only; until its first pass is in they read "analysing...".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from mlaprof.analysis.capture_status import no_full_graph
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.padding import padding_waste
from mlaprof.analysis.splits import decided_on_device
from mlaprof.analysis.timing import TIMING_SHORT, timing_label
from mlaprof.store.liveness import run_status
from mlaprof.sync_kinds import SYNC
from mlaprof.tui.aggregate import PADDING_SUMS, LayerAgg, RankState, merge_ranks

ANALYSING = "analysing..."


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
    """Everything one frame of the dashboard shows (already filtered to a rank or aggregated)."""

    name: str
    scenario: str
    device: str
    backend: str
    status: str
    rank_label: str
    ranks: list[int]
    graph_mode: str
    capture: str
    steps: int
    events: int
    latency_ms: list[float]
    latency: dict[str, float | None]
    latency_scope: str  # "rank 0 of 8" where several ranks are shown, else ""
    layers: list[dict[str, Any]]
    layer_scope: str  # "all steps" or "step N"
    splits: list[dict[str, Any]]
    padding: list[dict[str, Any]]
    padding_total: dict[str, Any]
    memory: list[dict[str, Any]]
    captures: list[dict[str, Any]]
    syncs: list[dict[str, Any]]
    findings: list[Finding]
    findings_source: str  # "mlaprof.analysis", or why its findings are not shown yet
    headline: list[dict[str, str]]  # the analysis' key numbers (capture, memory, S, padding)
    capture_failed: bool = False  # the analysis' capture status says no FULL graph
    timing_label: str = ""  # how step times were measured (CPU reference timing, graph replay)
    timing_short: str = ""  # the same in a word or two (CPU ref, replay)
    policy: str = ""
    problem: str | None = None
    # the analysis' sections for engine runs, imported traces and imported vLLM logs (None: none)
    engine: dict[str, Any] | None = None
    shadow: dict[str, Any] | None = None
    trace: dict[str, Any] | None = None
    engine_starts: list[dict[str, Any]] | None = None
    fleet: dict[str, Any] | None = None  # the analysis' ranks side by side


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def build_view(
    meta: dict[str, Any],
    states: dict[int, RankState],
    rank: int | None,
    step_layers: list[dict[str, Any]] | None = None,
    step: int | None = None,
    analysis: dict[str, Any] | None = None,
    analysis_note: str = ANALYSING,
    problem: str | None = None,
    layer_sort: tuple[str, bool] = ("layer", False),
) -> View:
    """Build one frame; ``rank=None`` aggregates every rank. ``analysis`` is
    :func:`mlaprof.analysis.summary` of the run (``None`` until the first pass is in: the
    findings then read ``analysis_note``)."""
    ranks = sorted(states)
    chosen = [states[r] for r in ranks if rank is None or r == rank]
    st = merge_ranks(chosen) if chosen else RankState()
    scen = meta.get("scenario") if isinstance(meta.get("scenario"), dict) else {}
    # step times are per rank: over several ranks, the lowest rank's (ranks' times never mixed
    # into one percentile; the analysis' headline gives every rank's median)
    lt = states[ranks[0]] if rank is None and len(chosen) > 1 else st
    lat_scope = f"rank {ranks[0]} of {len(chosen)}" if lt is not st else ""
    lat = [d / 1e6 for _, d in lt.recent]
    mean = lt.step_ns_sum / lt.steps / 1e6 if lt.steps else None
    latency = {
        "last": lat[-1] if lat else None,
        "p50": statistics.median(lat) if lat else None,
        "p90": _pct(lat, 0.9),
        "mean": mean,
        "min": lt.step_ns_min / 1e6 if lt.step_ns_min is not None else None,
        "max": lt.step_ns_max / 1e6 if lt.step_ns_max is not None else None,
    }
    policy = str(scen.get("policy") or "")
    # syncs per layer from the syncs table: runs that watch only some steps leave layers.syncs empty
    site_syncs: dict[Any, int] = {}
    for key, val in st.syncs.items():
        if key[1] == SYNC:  # the one sync count: device->host syncs, other kinds apart
            site_syncs[key[0]] = site_syncs.get(key[0], 0) + val[0]
    if step_layers is not None:
        layers = step_layers
        scope = f"step {step}"
    else:
        layers = [
            {
                "layer": k,
                "time_ms": a.total_ns / a.rows / 1e6 if a.rows else None,
                "syncs": max(a.syncs, site_syncs.get(k, 0)),
                "used": a.used,
                "deserved": a.deserved,
                "occupancy": _layer_occupancy(st, a, policy),
                "collapsed": a.collapsed,
                "rows": a.rows,
            }
            for k, a in st.layers.items()
        ]
        scope = "mean over all steps"
        if analysis:  # the analysis' verdicts per layer (syncs, S judged against, collapse)
            _overlay_layer_verdicts(layers, analysis.get("layers") or [], rank)
    key, rev = layer_sort
    layers = sorted(layers, key=lambda r: _sort_key(r.get(key)), reverse=rev)
    splits = [
        {
            "capture_size": size,
            "policy": policy,
            # S decided on the device at replay (the analysis' rule): no host S to show, even
            # before the first analysis pass is in
            "on_device": decided_on_device(str(policy)),
            "used": a.last.get("used"),
            "deserved": a.last.get("deserved"),
            "frozen": a.last.get("frozen"),
            "occ_used": a.last.get("occupancy_used"),
            "occ_deserved": a.last.get("occupancy_deserved"),
            "min_used": a.min_used,
            "max_used": a.max_used,
            "collapsed": a.collapsed,
            "steps": a.rows,
            "target": a.last.get("target"),
        }
        for (size, policy), a in sorted(st.splits.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    padding = []
    tot = dict.fromkeys(PADDING_SUMS, 0)
    for size, sums in sorted(st.padding.items(), key=lambda kv: _sort_key(kv[0])):
        row = dict(zip(PADDING_SUMS, sums, strict=True))
        for k in PADDING_SUMS:
            tot[k] += row[k]
        padding.append({"capture_size": size, **row, "waste": _waste(row)})
    tot["waste"] = _waste(tot)
    headline = analysis["headline"] if analysis else []
    capture = next((h["value"] for h in headline if h["label"] == "capture"), analysis_note)
    status = analysis["capture"]["status"] if analysis else ""
    memory = [
        {"capture_size": size, "graph_mode": mode, **{k: v for k, v in row.items()}}
        for (size, mode), row in sorted(st.memory.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    syncs = [
        {
            "layer": k[0],
            "kind": k[1],
            "op": k[2],
            "location": k[3],
            "function": k[4],
            "count": v[0],
            "first_step": v[1],
            "detail": v[2],
        }
        for k, v in sorted(st.syncs.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    mode = (
        max(st.modes, key=lambda m: st.modes[m])
        if st.modes
        else str(meta.get("graph_mode") or scen.get("graph_mode") or "?")
    )
    return View(
        name=str(meta.get("name", "?")),
        scenario=str(scen.get("name") or meta.get("source") or "?"),
        device=str(analysis["device"] if analysis else meta.get("device") or "unknown"),
        backend=str(meta.get("backend") or st.last_step.get("backend") or "?"),
        status=_status(chosen),
        rank_label="all ranks" if rank is None and len(ranks) > 1 else f"rank {rank or 0}",
        ranks=ranks,
        graph_mode=mode,
        capture=capture,
        steps=st.steps,
        events=sum(st.counts.values()),
        latency_ms=lat,
        latency=latency,
        latency_scope=lat_scope,
        layers=layers,
        layer_scope=scope,
        splits=splits,
        padding=padding,
        padding_total=tot,
        memory=memory,
        captures=sorted(st.captures.values(), key=lambda r: _sort_key(r.get("capture_size"))),
        syncs=syncs,
        findings=sorted(
            (Finding(**f) for f in analysis["findings"]) if analysis else [], key=lambda f: f.rank
        ),
        findings_source="mlaprof.analysis" if analysis else analysis_note,
        headline=headline,
        capture_failed=no_full_graph(status),
        timing_label=timing_label(st.last_step.get("timing")) if st.last_step else "",
        timing_short=TIMING_SHORT.get(str(st.last_step.get("timing")), "") if st.last_step else "",
        policy=policy,
        problem=problem,
        engine=analysis.get("engine") if analysis else None,
        shadow=analysis.get("shadow") if analysis else None,
        trace=analysis.get("trace") if analysis else None,
        engine_starts=analysis.get("engine_starts") if analysis else None,
        fleet=analysis.get("fleet") if analysis else None,
    )


def _overlay_layer_verdicts(
    layers: list[dict[str, Any]], verdicts: list[dict[str, Any]], rank: int | None
) -> None:
    """Per layer, what the analysis says (summed over the ranks shown; syncs: the most any
    shown rank has), so the table and the findings never disagree."""
    by_layer: dict[int, list[dict[str, Any]]] = {}
    for v in verdicts:
        if rank is None or v["rank"] == rank:
            by_layer.setdefault(v["layer"], []).append(v)
    for row in layers:
        vs = by_layer.get(row["layer"])
        if not vs:
            continue
        syncs = [v["syncs"] for v in vs if v["syncs"] is not None]
        refs = [v["S_reference"] for v in vs if v["S_reference"] is not None]
        row["syncs"] = max(syncs) if syncs else row["syncs"]
        row["collapsed"] = sum(v["collapsed"] for v in vs)
        row["rows"] = sum(v["steps"] for v in vs)
        row["deserved"] = min(refs) if refs else None
        if len(set(refs)) > 1:
            row["deserved_max"] = max(refs)
        row["reference"] = vs[0]["reference"]
        used = [v["S_min"] for v in vs if v["S_min"] is not None]
        if len(set(used)) > 1:  # ranks that ran different S: their range, not one rank's S
            row["used"], row["used_max"] = min(used), max(used)


def _status(states: list[RankState]) -> str:
    # the reader's rule (liveness.run_status); "waiting": no rank's database yet
    got = [s.status for s in states if s.status != "waiting"]
    return run_status(got) if got else "waiting"


def _layer_occupancy(st: RankState, a: LayerAgg, policy: str) -> float | None:
    """Occupancy that goes with the layer's latest S: the splits row of the run's own policy
    (any policy's row with the same S when the run names none)."""
    rows = [agg.last for (_, p), agg in st.splits.items() if p == policy] or [
        agg.last for agg in st.splits.values()
    ]
    for row in rows:
        if row.get("used") == a.used and row.get("occupancy_used") is not None:
            return row["occupancy_used"]
    return None


def _waste(row: dict[str, Any]) -> float | None:
    return padding_waste(row.get("real_tokens"), row.get("padding_tokens"))


def _sort_key(v: Any) -> tuple[int, Any]:
    if v is None:
        return (1, 0)
    if isinstance(v, tuple):
        return (0, tuple(_sort_key(x) for x in v))
    return (0, v) if isinstance(v, (int, float)) else (0, str(v))

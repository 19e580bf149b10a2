"""Question 1: is the verify path graph-capturable? Which op, on which layer, at which line?"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlaprof.analysis.capture_status import capture_region
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _origin, step_checks_by_rank
from mlaprof.analysis.run_checks import RunChecks
from mlaprof.analysis.sections import (
    LayerRow,
    LayerSyncs,
    RankSyncs,
    SyncCounts,
    SyncRecord,
    TraceSync,
    TraceSyncs,
)
from mlaprof.analysis.step_stats import by_step
from mlaprof.analysis.typed_json import to_json
from mlaprof.rank_counts import counted, per_rank_count, plural, rank_list, ranks_of
from mlaprof.step_sources import SOURCE_GAPS
from mlaprof.sync_kinds import CAPTURE_ERROR, KINDS, SYNC

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta

# the sync count of a run no probe watched (never "0 syncs")
NOT_CHECKED = "not checked (no step of this run was watched for syncs)"

_FIX = {
    "aten._local_scalar_dense": (
        "compute this value in the metadata builder (on the host, outside the captured region) "
        "and pass it in"
    ),
    "aten.repeat_interleave.Tensor": (
        "precompute the expansion in the metadata builder, or pass output_size= from a host value"
    ),
    "Tensor.tolist": "keep a host copy in the builder instead of reading the tensor back",
    "aten.nonzero": "use a fixed-size formulation (masks, nonzero_static) or move it to the builder",
}
_ALLOC_FIX = (
    "size the buffer from a host value the builder knows, or preallocate a persistent buffer "
    "at the largest capture size"
)


def fill_layer_syncs(layers: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """``layers.syncs`` where a producer left it empty (runs that watch only some steps):
    the device->host syncs (:data:`mlaprof.sync_kinds.SYNC`) the probe recorded in that
    rank's step and layer, for the steps it watched; ``None`` stays for unwatched steps. The
    sync-counting rule, once: the store returns the rows as recorded, and every analysis of a
    run (the summary's tables, the live fold's, one step's layer rows) fills them here."""
    if syncs.empty or layers.empty or not layers["syncs"].isna().any():
        return layers
    watched = watched_steps(layers, syncs)  # the steps the probe watched (one rule)
    n = (
        syncs[syncs["kind"] == SYNC]
        .groupby(["rank", "step", "layer"])
        .size()
        .rename("_n")
        .reset_index()
    )
    keys = ["rank", "step", "layer"]
    out = layers.merge(watched.assign(_w=True), on=["rank", "step"], how="left")
    out = out.merge(n, on=keys, how="left")
    fill = out["syncs"].isna() & out["_w"].eq(True)
    out.loc[fill, "syncs"] = out.loc[fill, "_n"].fillna(0).astype(int)
    return out.drop(columns=["_w", "_n"])


def fix_for(op: str, kind: str) -> str:
    if kind == "alloc":
        return _ALLOC_FIX
    for key, fix in _FIX.items():
        if op.startswith(key):
            return fix
    return "move the data-dependent work into the metadata builder, outside the captured region"


def _int(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def sync_rows(syncs: pd.DataFrame, kind: str) -> list[SyncRecord]:
    """The recorded rows of one kind (:mod:`mlaprof.sync_kinds`), rank by rank."""
    if syncs.empty:
        return []
    return [
        SyncRecord(
            rank=_int(r.rank),  # type: ignore[arg-type]
            layer=_int(r.layer),  # type: ignore[arg-type]
            step=_int(r.step),  # type: ignore[arg-type]
            op=r.op,
            location=r.location,
            function=r.function,
        )
        for r in syncs[syncs["kind"] == kind].itertuples()
    ]


def watched_steps(layers: pd.DataFrame, syncs: pd.DataFrame) -> pd.DataFrame:
    """``(rank, step)`` of every step the sync probe watched: a layer record whose ``syncs`` is
    set (0 included: checked, none found) or a step with a recorded row. A clean checked step
    leaves no sync row, so the rows alone cannot tell "checked: 0" from "not checked"."""
    parts = []
    if not layers.empty and "syncs" in layers:
        parts.append(layers.loc[layers["syncs"].notna(), ["rank", "step"]])
    if not syncs.empty:
        parts.append(syncs[["rank", "step"]])
    if not parts:
        return pd.DataFrame({"rank": [], "step": []}, dtype="int64")
    both = pd.concat(parts).dropna().astype("int64")
    return both.drop_duplicates().reset_index(drop=True)


def probe_watched(watched: pd.DataFrame, syncs: pd.DataFrame) -> bool:
    """Whether the sync probe checked anything: a step watched (:func:`watched_steps`) or a
    sync row recorded. The one rule behind "not checked" in the sync count and in the capture
    verdict a scenario run predicts from its syncs (nothing watched predicts nothing)."""
    return not (watched.empty and syncs.empty)


def per_layer_step(count: int, layer_steps: int) -> float:
    """The one sync rate every view and finding states: syncs per layer per WATCHED step (a
    step the probe watched and found clean counts, so 2 syncs on layer 0 in 2 of 4 watched
    steps are 0.5). ``layer_steps``: the layers hit times the steps watched, summed over ranks."""
    return count / max(1, layer_steps)


def _watched_per_rank(watched: pd.DataFrame) -> dict[int, int]:
    return {int(r): int(w["step"].nunique()) for r, w in watched.groupby("rank")}


def sync_counts(
    syncs: pd.DataFrame,
    layers: pd.DataFrame | None = None,
    host: TraceSyncs | None = None,
    steps: pd.DataFrame | None = None,
) -> SyncCounts:
    """The one sync count every view shows: rows of kind ``sync`` (device->host syncs), per layer
    per watched step and in total, rank by rank; the other kinds are counted apart
    (``by_kind``), never added in. ``checked`` is False when no step was watched (a total of 0
    then means nothing); ``text`` is the line every view prints. ``host``: an imported trace's
    host calls placed in MLA layers (:func:`sync_evidence`), ``steps`` its steps: where no probe
    watched a step, the trace's own check is the count (one answer for every view)."""
    by_kind = dict.fromkeys(KINDS, 0)
    if counted_by_host(layers, syncs, host) is not None:
        return host_sync_counts(host, steps if steps is not None else pd.DataFrame())
    watched = watched_steps(layers if layers is not None else pd.DataFrame(), syncs)
    if not probe_watched(watched, syncs):
        # an import with no probe: why its own check could not count either, in the same line
        return not_checked_counts(host.evidence if host is not None else "")
    if not syncs.empty:
        for k, n in syncs["kind"].value_counts().items():
            by_kind[str(k)] = int(n)
        blocking = syncs[syncs["kind"] == SYNC]
    else:
        blocking = syncs
    per_rank: list[RankSyncs] = []
    per_layer: list[LayerSyncs] = []
    # a rank whose layers were recorded but none watched: "not checked", never a 0 in the range
    unchecked = sorted(_ranks_of(layers, steps) - set(_watched_per_rank(watched)))
    for rank, w in watched.groupby("rank"):
        n_watched = int(w["step"].nunique())  # the steps the probe watched on this rank
        b = blocking[blocking["rank"] == rank] if not blocking.empty else blocking
        by_layer = b.groupby("layer").size() if not b.empty else pd.Series(dtype="int64")
        for layer, n in by_layer.items():
            rate = per_layer_step(int(n), n_watched)
            per_layer.append(LayerSyncs(rank=int(rank), layer=int(layer), syncs=rate))
        per_rank.append(RankSyncs(rank=int(rank), total=int(len(b)), layers=int(len(by_layer)),
                                  watched_steps=n_watched))  # fmt: skip
    total = int(len(blocking))
    n_layers = int(blocking["layer"].nunique()) if total else 0
    n_steps = int(len(watched))  # (rank, step) pairs: each rank's, as an import counts them
    checked = bool(len(watched))
    return SyncCounts(
        checked=checked,
        total=total,
        layers=n_layers,
        watched_steps=n_steps,
        per_layer=per_layer,
        by_kind=by_kind,
        per_rank=per_rank,
        text=_counted(per_rank, total, n_layers, n_steps, "", unchecked)
        if checked
        else NOT_CHECKED,
        ranks_not_checked=(unchecked or None) if checked else None,
    )


def _ranks_of(*frames: pd.DataFrame | None) -> set[int]:
    """The ranks ``frames`` hold records of (a run's layers, its steps)."""
    out: set[int] = set()
    for f in frames:
        if f is not None and not f.empty and "rank" in f:
            out |= {int(r) for r in pd.unique(f["rank"].dropna())}
    return out


def not_checked_counts(trace_why: str = "") -> SyncCounts:
    """No step was watched and nothing recorded: every count unknown (None), never a 0 that
    reads as "no syncs" beside the "not checked" verdict. ``trace_why``: an imported trace's
    reason its own sync check found nothing to count (its ``trace.syncs.evidence``), said in the
    line every view prints, so no view reads a scenario's words alone for an import."""
    text = f"{NOT_CHECKED}; the trace's own check: {trace_why}" if trace_why else NOT_CHECKED
    return SyncCounts(
        checked=False,
        total=None,
        layers=None,
        watched_steps=0,
        per_layer=None,
        by_kind=None,
        per_rank=None,
        text=text,
    )


def layer_syncs(layers: list[LayerRow], counts: SyncCounts) -> list[LayerRow]:
    """The layer rows (:func:`mlaprof.analysis.layers.layer_table`) with the one sync count: a
    row whose own count is unknown (no probe watched it) on a rank the count checked (an
    imported trace's host-sync check) reads that rank's per-layer rate, 0 where none was
    found, never "unknown" beside a checked count."""
    if not counts.checked:
        return layers
    checked = {r.rank for r in counts.per_rank or []}
    rate = {(r.rank, r.layer): r.syncs for r in counts.per_layer or []}
    return [
        dataclasses.replace(r, syncs=float(rate.get((r.rank, r.layer), 0)))
        if r.syncs is None and r.rank in checked
        else r
        for r in layers
    ]


def _counted(
    per_rank: list[RankSyncs],
    total: int,
    n_layers: int,
    steps: int,
    what: str,
    unchecked: Sequence[int] = (),
) -> str:
    """The sync count line: one rank's count, or per rank (a range over ranks), never a sum
    that reads as one rank's; the layers they were on where there are any ("0 on 0 layers"
    read as if no layer had been watched). ``unchecked``: the ranks nothing checked, said
    "not checked" after the checked ranks' count, which names them (never a 0 of theirs)."""
    where = f" on {counted(n_layers, 'layer(s)')}" if total else ""
    # the noun agrees with the count said: one rank's, else the range's upper end
    what = plural(what, total if len(per_rank) <= 1 else max(r.total for r in per_rank))
    if len(per_rank) <= 1:
        said = f"{total}{what}{where} ({counted(steps, 'step(s)')} checked)"
    else:
        totals = per_rank_count({r.rank: r.total for r in per_rank})
        watched = per_rank_count({r.rank: r.watched_steps for r in per_rank}, "step(s)")
        said = f"{totals}{what}{where}, {watched} checked"
    if not unchecked:
        return said
    return f"{rank_list(r.rank for r in per_rank)}: {said}; {rank_list(unchecked)}: not checked"


def trace_sync_text(host: TraceSyncs, ranks: Sequence[int]) -> str:
    """An imported trace's own host-sync verdict as every view says it: "unknown", or its host
    calls in MLA layers per rank (``ranks``: the run's; never a sum read as one rank's), then
    its evidence (which trace, or why it is unknown)."""
    if host.status == "unknown" or host.count is None:
        return f"unknown ({host.evidence})"
    checked, unchecked = _host_ranks(host, ranks)
    per = dict.fromkeys(checked, 0)
    for x in host.syncs:
        per[x.rank] = per.get(x.rank, 0) + 1
    said = f"{per_rank_count(per or {0: host.count})} in MLA layers"
    if unchecked:  # a rank whose host calls nothing checked: not a 0 in the range
        said = f"{rank_list(per)}: {said}; {rank_list(unchecked)}: not checked"
    return f"{said} ({host.evidence})"


def _host_ranks(host: TraceSyncs, ranks: Iterable[int]) -> tuple[list[int], list[int]]:
    """The ranks an imported trace's host-sync check covered (a rank with a sync found was),
    and those of ``ranks`` (and its own) it did not; a section without ``ranks_checked``
    covered every rank."""
    ranks = {int(r) for r in ranks}
    if host.ranks_checked is None:
        return sorted(ranks), sorted(set(host.ranks_not_checked or ()) - ranks)
    checked = set(host.ranks_checked) | {x.rank for x in host.syncs}
    return sorted(checked), sorted((ranks | set(host.ranks_not_checked or ())) - checked)


# the statuses of an imported trace's host-sync check that counted (sync_evidence's; "unknown":
# it could not check)
HOST_COUNTED = ("none", "found")


def counted_by_host(
    layers: pd.DataFrame | None, syncs: pd.DataFrame, host: TraceSyncs | None
) -> TraceSyncs | None:
    """``host`` where the trace's own check is the run's sync count (:func:`sync_counts`' rule):
    it counted, and no probe watched a step of the run (``layers``, ``syncs``: every rank's);
    None: the probe's count stands, or nothing counted."""
    if host is None or host.status not in HOST_COUNTED:
        return None
    watched = watched_steps(layers if layers is not None else pd.DataFrame(), syncs)
    return host if watched.empty else None


def host_checked(
    host: TraceSyncs, steps: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[int], list[int]]:
    """What an imported trace's host-sync check watched: the steps (each checked rank's eager
    and PIECEWISE MLA steps, or all of them where that rank replayed graphs only: a captured
    region holds no host sync), the syncs it found (rank, step, layer, op), and the ranks it
    checked and did not. The one rule of the counts and of every view's per-step layers."""
    st = steps[steps["backend"].notna()] if "backend" in steps else steps
    if "graph_mode" in st and not st.empty:
        # each rank's eager steps where it has some (its own mode, never another rank's)
        ran_eager = st["graph_mode"].isin(["eager", "piecewise"])
        st = st[ran_eager | ~ran_eager.groupby(st["rank"]).transform("any")]
    found = pd.DataFrame(
        [(x.rank, x.step, x.layer, x.op) for x in host.syncs],
        columns=["rank", "step", "layer", "op"],
    )
    checked, unchecked = _host_ranks(host, _ranks_of(st, found))
    st = st[st["rank"].isin(checked)] if not st.empty else st
    return st, found, checked, unchecked


def host_sync_counts(host: TraceSyncs, steps: pd.DataFrame) -> SyncCounts:
    """:func:`sync_counts` of an imported trace's host-sync check over the steps it watched
    (:func:`host_checked`); the rate is :func:`per_layer_step` over those steps."""
    st, found, _, unchecked = host_checked(host, steps)
    watched = _watched_per_rank(st[["rank", "step"]]) if not st.empty else {}
    per_layer: list[LayerSyncs] = []
    per_rank: list[RankSyncs] = []
    for rank in sorted(set(watched) | {int(r) for r in found["rank"]}):
        mine = found[found["rank"] == rank]
        n_watched = watched.get(rank, int(mine["step"].nunique()))
        for layer, n in mine.groupby("layer").size().items():
            rate = per_layer_step(int(n), n_watched)
            per_layer.append(LayerSyncs(rank=rank, layer=int(layer), syncs=rate))
        per_rank.append(RankSyncs(rank=rank, total=int(len(mine)),
                                  layers=int(mine["layer"].nunique()), watched_steps=n_watched))  # fmt: skip
    total = int(len(found))
    n_layers = int(found["layer"].nunique()) if total else 0
    n_steps = (
        sum(watched.values())
        if watched
        else int(found[["rank", "step"]].drop_duplicates().shape[0])
    )
    by_kind = dict.fromkeys(KINDS, 0)
    by_kind[SYNC] = total
    return SyncCounts(
        checked=True,
        total=total,
        layers=n_layers,
        watched_steps=n_steps,
        per_layer=per_layer,
        by_kind=by_kind,
        per_rank=per_rank,
        text=_counted(per_rank, total, n_layers, n_steps, " host sync(s) in MLA layers", unchecked)
        + f" ({host.evidence})",
        ranks_not_checked=unchecked or None,
    )


def _said(v: object, unknown: str) -> str:
    """A recorded text field as a finding says it: ``unknown`` where it was not recorded."""
    return unknown if v is None or (isinstance(v, float) and v != v) or v == "" else str(v)


def sync_findings(
    syncs: pd.DataFrame, graph_mode: str, layers: pd.DataFrame | None = None
) -> list[Finding]:
    """One finding per (kind, op, location), listing the layers it hits, at the rate
    :func:`per_layer_step` defines (over the steps watched: ``layers``' checked records and the
    steps with a row; without ``layers``, the steps with a row)."""
    if syncs.empty:
        return []
    watched = _watched_per_rank(watched_steps(layers if layers is not None else pd.DataFrame(),
                                              syncs))  # fmt: skip
    # the capture finding already names the first op that broke a real capture
    syncs = syncs[syncs["kind"] != CAPTURE_ERROR]
    out: list[Finding] = []
    # dropna=False: a sync whose op or line was not recorded is still a sync, said unknown
    for (kind, op, loc), g in syncs.groupby(["kind", "op", "location"], sort=False, dropna=False):
        op, loc = _said(op, "") or None, _said(loc, "") or None  # NaN -> None (JSON null)
        op_text, loc_text = op or "an unrecorded op", loc or "an unrecorded line"
        detail = next((str(d) for d in g["detail"] if _said(d, "")), "")
        hit = sorted({int(x) for x in g["layer"].dropna()})
        pairs = g[["rank", "layer"]].dropna().drop_duplicates()
        layer_steps = sum(watched.get(int(r), 0) for r in pairs["rank"])
        per_layer = per_layer_step(len(g), layer_steps)
        breaks = graph_mode == "FULL"
        region = capture_region(graph_mode)
        what = {
            "sync": f"device->host sync in {region}",
            "alloc": f"data-dependent allocation in {region}",
            "h2d": f"pageable host->device copy in {region}",
            "capture-error": "first op to break graph capture",
        }.get(str(kind), str(kind))
        out.append(
            Finding(
                kind=kind if kind in ("sync", "alloc") else "sync",
                severity="critical" if breaks and kind != "alloc" else "warning",
                title=f"{what}: {op_text} at {loc_text}",
                evidence=(
                    f"{counted(len(hit), 'layer(s)')} ({_span(hit)}), {per_layer:g} per layer per "
                    "step"
                    + (f"; {detail}" if detail else "")
                    + (
                        "; aborts CUDA/HIP graph capture, so the engine falls back to PIECEWISE"
                        if breaks and kind != "alloc"
                        else ""
                    )
                ),
                fix=fix_for(op_text, str(kind)),
                layer=hit[0] if hit else None,
                location=loc,
                data={"op": op, "layers": hit, "count": int(len(g))},
            )
        )
    return out


def _span(layers: list[int]) -> str:
    if not layers:
        return "-"
    if layers == list(range(layers[0], layers[-1] + 1)) and len(layers) > 2:
        return f"layers {layers[0]}-{layers[-1]}"
    return "layers " + ", ".join(map(str, layers[:8])) + ("..." if len(layers) > 8 else "")


# -- host calls a kernel trace's API / copy records place inside MLA layer windows -------------
SYNC_CALLS = (
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
    "hipMemcpyDtoH",
    "hipMemcpyWithStream",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cuStreamSynchronize",
    "cuCtxSynchronize",
)
D2H_OPS = ("DEVICE_TO_HOST", "DtoH", "Device -> Pageable", "Device -> Pinned")


def _api_ranks(checks: RunChecks, api: pd.DataFrame) -> set[int] | None:
    """The ranks with a HIP/CUDA API trace: each rank's own launch check counts its runtime
    calls, or a host-sync call of its was read. None: the import kept only its ranks' sum (an
    older import), so no rank's own is known and the sum stands for every rank, as before."""
    own = checks.ranks()
    with_api = {int(r) for r in pd.unique(api["rank"])} if not api.empty else set()
    if not own:
        fleet = int(checks.group("launches").get("runtime_api_calls", 0)) > 0
        return None if fleet or with_api else set()
    return with_api | {
        r for r, c in own.items() if int(c.group("launches").get("runtime_api_calls", 0)) > 0
    }


def sync_evidence(
    meta: RunMeta,
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    api: pd.DataFrame,
    copies: pd.DataFrame,
    checks: RunChecks | None = None,
) -> TraceSyncs:
    """Host syncs and device-to-host copies inside the window of an EAGER step's layer (from the
    end of the layer before to the end of this one; layer 0 looks back one median inter-layer
    gap). Layers of graph replays hold none: the host runs outside a replay, and a sync in the
    captured region would have failed the capture. Decided rank by rank: a rank without an API
    or copy trace of its own, or without an eager MLA layer (and not all graph replays), is not
    checked (``ranks_not_checked``, never a 0); none checked: "unknown".
    ``checks``: the import's trace checks (its launch counts, each rank's step model)."""
    checks = checks if checks is not None else RunChecks()
    origin = _origin(meta)
    api_ranks = _api_ranks(checks, api)
    copy_ranks = {int(r) for r in pd.unique(copies["rank"])} if not copies.empty else set()
    events = []
    if not api.empty:
        events.append(
            pd.DataFrame(
                {
                    "rank": api["rank"],
                    "op": api["function"],
                    "t_ns": api["start_ns"],
                    "end_ns": api["end_ns"],
                }
            )  # fmt: skip
        )
    if not copies.empty:
        events.append(
            pd.DataFrame(
                {
                    "rank": copies["rank"],
                    "op": "memory copy " + copies["operation"].astype(str),
                    "t_ns": copies["start_ns"],
                    "end_ns": copies["end_ns"],
                }
            )
        )
    mode = (
        steps.set_index(["rank", "step"])["graph_mode"]
        if not steps.empty
        else pd.Series(dtype=object)
    )
    mode = mode[~mode.index.duplicated(keep="last")]
    # PIECEWISE attention runs eagerly too: a sync in its layers is seen the same way (the
    # layers looked up only where a step ran so: a fleet's graph replays hold millions)
    ran_eager = mode.isin(["eager", "piecewise"])
    eager = (
        layers[by_step(layers, mode).isin(["eager", "piecewise"])]
        if not layers.empty and ran_eager.any()
        else layers.iloc[:0]
    )
    if not eager.empty:
        t_step = steps.set_index(["rank", "step"])["t_start_ns"]
        t_step = t_step[~t_step.index.duplicated(keep="last")]
        eager = eager.assign(step_t0=by_step(eager, t_step).to_numpy())
    ranks = sorted(
        {int(r) for r in checks.ranks()}
        | _ranks_of(steps, layers)
        | (api_ranks or set())
        | copy_ranks
    )
    # each rank by its own evidence: which trace its calls come from, or why none is checked
    by_api, by_copy, graph, no_trace, no_layers = [], [], [], [], []
    for r in ranks:
        own_api = api_ranks is None or r in api_ranks
        if not own_api and r not in copy_ranks:
            no_trace.append(r)
            continue
        if not eager.empty and (eager["rank"] == r).any():
            (by_api if own_api else by_copy).append(r)
            continue
        m = mode[mode.index.get_level_values("rank") == r] if not mode.empty else mode
        (graph if len(m) and (m == "graph").all() else no_layers).append(r)
    placed = by_api + by_copy
    checked = sorted(placed + graph)
    unchecked = sorted(no_trace + no_layers)
    why = _why_unchecked(ranks, no_trace, no_layers)
    if not checked:
        return TraceSyncs(status="unknown", count=None, syncs=[], evidence=why, provenance=origin,
                          ranks_checked=[], ranks_not_checked=unchecked)  # fmt: skip
    ev = pd.concat(events, ignore_index=True) if events else pd.DataFrame()
    found: list[TraceSync] = []
    sources = step_checks_by_rank(checks)
    mine_eager = eager[eager["rank"].isin(placed)] if placed else eager.iloc[:0]
    for rank, lay in mine_eager.groupby("rank"):  # calls placed in their own rank's layers
        mine = ev[ev["rank"] == rank] if not ev.empty else ev
        # a step bounded by idle gaps spans its MLA kernels only: its start is no bound
        src = sources.get(int(rank), {}).get("source")
        if src in (None, SOURCE_GAPS) and "step_t0" in lay:
            lay = lay.drop(columns="step_t0")
        found += _place_calls(int(rank), lay, mine)
    parts = []
    if placed:
        what = " and ".join(
            f"the {name}" + (f" of {rank_list(rs)}" if unchecked or (by_api and by_copy) else "")
            for name, rs in (("API trace", by_api), ("memory-copy trace", by_copy))
            if rs
        )
        parts.append(f"from {what}, {len(mine_eager)} eager MLA layer windows")
    if graph:
        n_graph = int(mode.index.get_level_values("rank").isin(graph).sum())
        whose = f" of {rank_list(graph)}" if len(graph) < len(ranks) else ""
        parts.append(
            f"all {n_graph} MLA steps{whose} are graph replays: the captured region holds no "
            "host sync (it would have failed the capture); host calls run outside the replays"
        )
    if unchecked:
        parts.append(why)
    return TraceSyncs(
        status="found" if found else "none",
        count=len(found),
        syncs=found,
        evidence="; ".join(parts),
        provenance=origin,
        ranks_checked=checked,
        ranks_not_checked=unchecked or None,
    )


def _why_unchecked(ranks: list[int], no_trace: list[int], no_layers: list[int]) -> str:
    """Why the host syncs of ``no_trace`` and ``no_layers`` are unknown; the whole trace's
    words where every rank is in one of them (a trace alike on every rank reads as before)."""
    if no_trace == ranks:
        return "no HIP/CUDA API or memory-copy trace in the import"
    if no_layers == ranks:
        return "no eager MLA layers to place host calls in"
    out = []
    for rs, text in ((no_trace, "no HIP/CUDA API or memory-copy trace"),
                     (no_layers, "no eager MLA layer to place host calls in")):  # fmt: skip
        if rs:
            out.append(f"{rank_list(rs)} {'has' if len(rs) == 1 else 'have'} {text}")
    return "; ".join(out)


def _place_calls(rank: int, lay: pd.DataFrame, ev: pd.DataFrame) -> list[TraceSync]:
    """Host calls of one rank inside the window of one of its eager layers. A step's first
    layer looks back one median inter-layer gap, never before its step began (the previous
    step's end-of-step sync is not in it)."""
    lay = lay.sort_values("t_start_ns").reset_index(drop=True)
    t0 = lay["t_start_ns"].to_numpy(np.int64)
    t1 = t0 + lay["duration_ns"].to_numpy(np.int64)
    same = np.r_[False, lay["step"].to_numpy()[1:] == lay["step"].to_numpy()[:-1]]
    gaps = (t0[1:] - t1[:-1])[same[1:]]
    look = int(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 0
    first = t0 - look
    if "step_t0" in lay:
        st0 = lay["step_t0"].to_numpy(float)
        first = np.where(
            np.isnan(st0), first, np.maximum(first, np.nan_to_num(st0)).astype(np.int64)
        )
    ws = np.where(same, np.r_[0, t1[:-1]], first)
    found = []
    if ev.empty:
        return found
    t = ev["t_ns"].to_numpy(np.int64)
    i = np.searchsorted(ws, t, side="right") - 1
    ok = (i >= 0) & (t <= t1[np.clip(i, 0, None)])
    # columns read once as arrays: a row lookup per call cost ~0.1 ms each (a trace of many)
    step, layer = lay["step"].to_numpy(), lay["layer"].to_numpy()
    op, end = ev["op"].to_numpy(), ev["end_ns"].to_numpy()
    for k in np.flatnonzero(ok):
        found.append(
            TraceSync(
                rank=rank,
                op=str(op[k]),
                step=int(step[i[k]]),
                layer=int(layer[i[k]]),
                t_ns=int(t[k]),
                duration_ns=int(end[k] - t[k]),
            )
        )
    return found


def host_sync_findings(ev: TraceSyncs | None, ranks: int = 1) -> list[Finding]:
    """The host syncs :func:`sync_evidence` placed inside MLA layers, one finding per op
    (``ev`` None: the run holds no host-call trace to place); ``ranks``: the run's, the layers
    are counted per rank and the finding names the ranks they are on."""
    if ev is None or ev.status != "found":
        return []
    out = []
    df = pd.DataFrame(to_json(ev.syncs))
    for op, g in df.groupby("op", sort=False):
        layers = sorted(set(zip(g["rank"], g["step"], g["layer"], strict=True)))
        per = Counter(int(r) for r, _, _ in layers)
        on = f" on {ranks_of(per, ranks)}" if ranks > 1 else ""
        first = g.iloc[0]
        out.append(
            Finding(
                kind="sync",
                severity="critical",
                title=f"host sync inside MLA layers: {op} in {per_rank_count(per, 'layer(s)')}{on}",
                evidence=(
                    f"first at rank {first['rank']} step {first['step']} layer {first['layer']}, "
                    f"t = {first['t_ns']} "
                    f"ns ({first['duration_ns'] / 1e3:.1f} us host call); {ev.provenance}. "
                    "A sync inside a layer aborts CUDA/HIP graph capture: this path cannot run "
                    "under FULL graphs"
                ),
                fix=(
                    "move the device->host reads into the metadata builder, outside the layers "
                    "(vLLM #51171)"
                ),
                layer=int(first["layer"]),
                data={
                    "op": op,
                    "count": int(len(g)),
                    "layers": [list(x) for x in layers],
                    "ranks": sorted(per),
                },
            )
        )
    return out

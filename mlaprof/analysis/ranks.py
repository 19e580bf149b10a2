"""The fleet view: ranks side by side, never merged. Which ranks collapsed and which did not, and
S per layer across ranks (the range, and which ranks ran each S), from the per-rank layer rows of
:func:`mlaprof.analysis.layers.layer_table`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlaprof.analysis.sections import (
    NOT_JUDGED,
    DpGroup,
    Fleet,
    FleetEngine,
    FleetLayer,
    FleetRank,
    SplitRanks,
)
from mlaprof.rank_counts import counted, rank_list, rank_span, ranks_count

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RankSource
    from mlaprof.analysis.sections import EngineGroup, LayerRow

# why equal batch rows never tell DP groups apart (vLLM 0.32 ``v1/worker/dp_utils.py``
# ``coordinate_batch_across_dp`` L190, padding to the largest rank's count at L104-106: every
# DP rank runs the same, padded, token count)
EQUAL_ROWS = (
    "vLLM pads every DP rank to the same token count, so equal batch rows cannot tell DP groups "
    "apart"
)


def _differ(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two ranks' batch rows per step prove different batches: they differ however the
    two step lists are lined up (shifted by one step either way: a window may cut one rank's
    first step and not another's)."""
    for off in (-1, 0, 1):
        x, y = a[max(0, off) :], b[max(0, -off) :]
        n = min(len(x), len(y))
        if n and x[:n] == y[:n]:
            return False
    return True


def dp_groups(
    batches: dict[int, tuple[Any, ...]], sources: list[RankSource] | None = None
) -> tuple[dict[int, int], str, bool]:
    """Data-parallel groups where the evidence shows them, as (group per rank, where they come
    from, exact). The ranks' own metadata (a ``dp_rank`` recorded per rank) gives them exactly;
    otherwise ranks that ran different batch rows cannot be tensor-parallel peers (those share a
    batch), which shows at least that many groups; equal rows show nothing. Groups are numbered
    in the order of their first rank; a rank with no evidence gets none."""
    meta = {s.rank: s.dp_rank for s in sources or []}
    if meta and all(isinstance(v, int) for v in meta.values()):
        order = {v: i for i, v in enumerate(dict.fromkeys(meta[r] for r in sorted(meta)))}
        return {int(r): order[v] for r, v in meta.items()}, "from the ranks' metadata", True
    reps: list[tuple[Any, ...]] = []
    out: dict[int, int] = {}
    for rank in sorted(batches):
        sig = batches[rank]
        if not sig:
            continue
        g = next((i for i, r in enumerate(reps) if not _differ(sig, r)), None)
        if g is None:
            g = len(reps)
            reps.append(sig)
        out[rank] = g
    if len(reps) < 2:
        return {}, f"unknown: {EQUAL_ROWS}" if out else "unknown (no batch rows recorded)", False
    return (
        out,
        f"at least {len(reps)}: ranks that ran different batch rows cannot share a DP group (TP "
        f"peers run one batch); ranks that ran the same rows may still be apart ({EQUAL_ROWS})",
        False,
    )


def _engine_dp_groups(
    engines: list[EngineGroup],
    batches: dict[int, tuple[Any, ...]],
    sources: list[RankSource] | None,
) -> tuple[dict[int, int], str, bool]:
    """DP groups found within each engine only (ranks of two engines are never DP peers),
    numbered across engines in order; the source says it per engine."""
    groups: dict[int, int] = {}
    said, exact = [], True
    for e in engines:
        mine = set(e.ranks)
        g, how, ex = (
            dp_groups({r: b for r, b in batches.items() if r in mine},
                      [s for s in sources or [] if s.rank in mine])
            if len(mine) > 1
            else ({}, "unknown (one rank)", False)
        )  # fmt: skip
        base = len(set(groups.values()))
        groups.update({r: base + v for r, v in g.items()})
        said.append(f"engine {e.engine}: {how}")
        exact &= ex
    return groups, "; ".join(said), exact and bool(groups)


def fleet_summary(
    ranks: list[int],
    layer_rows: list[LayerRow],
    sources: list[RankSource] | None = None,
    batches: dict[int, tuple[Any, ...]] | None = None,
    trust: dict[int, str] | None = None,
    engines: list[EngineGroup] | None = None,
    source_format: str | None = None,
    imported: bool = True,
) -> Fleet:
    """The ranks side by side (ranks_collapsed, ranks_not_collapsed, ranks_not_judged, agree,
    per_rank, per_layer); each rank with its host, pid and GPU where the run recorded them
    (``sources``) and its DP group where the evidence shows it (:func:`dp_groups`; ``batches``:
    rank -> batch rows per step). ``engines``
    (:func:`mlaprof.analysis.engines.engine_groups`): with more than one, DP groups are found
    within each engine, S is compared per engine and the fleet says so. ``source_format`` and
    ``imported``: what the run was imported from, or that it was recorded (``imported``
    False), for where the host/pid/agent columns come from."""
    src = {s.rank: s for s in sources or []}
    several = engines is not None and len(engines) > 1
    engine_of = {r: e.engine for e in engines or [] for r in e.ranks} if several else {}
    # a launcher that placed the ranks says their DP group: that evidence wins over inference
    placed = {r: s.dp_group for r, s in src.items() if s.dp_group is not None}
    if placed:
        how = next(iter(src.values())).placed_by
        groups, dp_source, dp_exact = placed, f"launcher: {how}", True
    elif several:
        groups, dp_source, dp_exact = _engine_dp_groups(engines or [], batches or {}, sources)
    else:
        groups, dp_source, dp_exact = (
            dp_groups(batches or {}, sources)
            if len(ranks) > 1
            else ({}, "unknown (one rank)", False)
        )
    per_rank = []
    any_layers = bool(layer_rows)  # none on any rank: the run records no layers (a log, an engine)
    for rank in ranks:
        rows = [r for r in layer_rows if r.rank == rank]
        used = [r.S_min for r in rows if r.S_min is not None]
        caps = [r.S_grid_cap for r in rows if r.S_grid_cap is not None]
        s = src.get(rank)
        judged = [r for r in rows if r.collapsed is not None]  # layers with an S to judge by
        per_rank.append(
            FleetRank(
                rank=rank,
                host=None if s is None else s.host,
                pid=None if s is None else s.pid,
                agent=None if s is None else s.agent,
                dp_group=groups.get(rank),
                engine=engine_of.get(rank) if several else None,
                trust=(trust or {}).get(rank),
                layers=len(rows) if any_layers else None,
                S_min=min(used) if used else None,
                S_max=max(used) if used else None,
                # None: no layer of the rank could be judged (never "0 collapsed")
                collapsed_layers=sum(1 for r in judged if r.collapsed) if judged else None,
                collapsed_steps=sum(r.collapsed or 0 for r in judged) if judged else None,
                # no S of its own: its records hold the grid's cap (S decided on the device)
                S_grid_cap=max(caps) if caps and not used else None,
            )
        )
    per_layer = []
    # S per layer across the ranks of one engine (several engines: one row per engine)
    keys = sorted({(engine_of.get(r.rank), r.layer) for r in layer_rows},
                  key=lambda k: (k[0] is None, k[0] or 0, k[1]))  # fmt: skip
    for eng, layer in keys:
        rows = [r for r in layer_rows if r.layer == layer and engine_of.get(r.rank) == eng]
        s_min = [r.S_min for r in rows if r.S_min is not None]
        caps = [r.S_grid_cap for r in rows if r.S_grid_cap is not None]
        times = [r.time_us for r in rows if r.time_us is not None]
        by_s: dict[int, list[int]] = {}
        for r in rows:
            if r.S_min is not None:
                by_s.setdefault(r.S_min, []).append(r.rank)
        per_layer.append(
            FleetLayer(
                layer=layer,
                ranks=len(rows),
                # a range and the ranks behind each value, never a value no rank ran (a median
                # of 1, 1, 8, 8 is 4.5)
                S_min=min(s_min) if s_min else None,
                S_max=max(s_min) if s_min else None,
                S_by_ranks=[SplitRanks(S=v, ranks=rank_span(rs)) for v, rs in sorted(by_s.items())],
                time_us_min=min(times) if times else None,
                time_us_max=max(times) if times else None,
                engine=eng if several else None,
                S_grid_cap=max(caps) if caps and not s_min else None,
            )
        )
    collapsed, fine, unjudged = _sides(per_rank)
    agree = all(
        _agree([r for r in per_rank if engine_of.get(r.rank) == eng],
               [p for p in per_layer if p.engine == eng])
        for eng in (sorted(set(engine_of.values())) if several else [None])
    )  # fmt: skip
    # nothing to set side by side: no rank judged and no layer's S (a run failed before a step)
    compared = any(r.collapsed_layers is not None for r in per_rank) or any(
        p.S_min is not None for p in per_layer
    )
    judged = len(unjudged) < len(per_rank)
    return Fleet(
        ranks=len(ranks),
        dp_groups=len(set(groups.values())) if groups else None,
        dp_groups_exact=dp_exact if groups else None,
        dp_groups_source=dp_source,
        # what the host/pid/agent columns are: where a launcher ran the rank, or an import's files
        hosts_source=_hosts_source(bool(placed), source_format, imported, src),
        # None where no rank was judged: "none collapsed" would be a verdict on nothing
        ranks_collapsed=collapsed if judged else None,
        ranks_not_collapsed=fine if judged else None,
        # ranks disagree when some collapsed and others did not, or their S differ per layer
        agree=agree,
        # the one line every view prints
        text=_engines_line(engines, per_rank, per_layer)
        if several
        else f"ranks: {len(ranks)}, nothing to compare (no rank holds layer records"
        + ("" if not any_layers else " with an S")
        + ")"
        if not compared
        else f"ranks: {len(ranks)}, {_verdict(per_rank, per_layer)}",
        per_rank=per_rank,
        per_layer=per_layer if any_layers else None,
        engines=_engine_rows(engines or [], per_rank, per_layer) if several else None,
        ranks_not_judged=unjudged or None,
    )


def _sides(per_rank: list[FleetRank]) -> tuple[list[int], list[int], list[int]]:
    """The ranks that collapsed, the judged ones that did not, and those no layer of which
    could be judged (no S reference): each rank on one side."""
    return (
        [r.rank for r in per_rank if r.collapsed_layers],
        [r.rank for r in per_rank if r.collapsed_layers == 0],
        [r.rank for r in per_rank if r.collapsed_layers is None],
    )


def _ranks_of_span(span: str) -> str:
    """``"2"`` -> ``"rank 2"``, ``"0-1, 3"`` -> ``"ranks 0-1, 3"`` (a :func:`rank_span`)."""
    return ("rank " if span.isdigit() else "ranks ") + span


def _s_differs(per_layer: list[FleetLayer]) -> str | None:
    """What S the ranks disagree on, by name: the ranks behind each S on the layers whose S
    differs, and on how many of the compared layers (``"S differs: 4 on rank 2, 16 on ranks
    0-1, 3 (61 of 61 layers)"``); None where every layer's S agrees."""
    split = [p for p in per_layer if p.S_min != p.S_max]
    if not split:
        return None
    shapes: dict[str, int] = {}  # each way the ranks split, and on how many layers
    for p in split:
        key = ", ".join(f"{v.S} on {_ranks_of_span(v.ranks)}" for v in p.S_by_ranks)
        shapes[key] = shapes.get(key, 0) + 1
    first, n = next(iter(shapes.items()))
    compared = sum(1 for p in per_layer if p.S_min is not None)
    other = (
        f"; the ranks split otherwise on {counted(len(split) - n, 'more layer(s)')} (per layer)"
        if len(shapes) > 1
        else ""
    )
    return f"S differs: {first} ({n} of {compared} layers){other}"


def _verdict(per_rank: list[FleetRank], per_layer: list[FleetLayer]) -> str:
    """The ranks' verdict in words: "all agree", or each disagreement named (which ranks
    collapsed and which did not, which ran which S); ranks not judged for a collapse are
    named as such, never counted on the side that did not collapse."""
    collapsed, fine, unjudged = _sides(per_rank)
    said = []
    if collapsed and fine:
        said.append(f"collapsed on {_list(collapsed)}, not on {_list(fine)}")
    s = _s_differs(per_layer)
    if s:
        said.append(s)
    if said:
        head = "DISAGREE: " + "; ".join(said)
    else:
        head = "all agree on S per layer" if unjudged and not (collapsed or fine) else "all agree"
    if unjudged:
        why = NOT_JUDGED.split(": ", 1)[1]
        head += f"; collapse not judged on {rank_list(unjudged)} ({why})"
    return head


def _hosts_source(
    placed: bool, source_format: str | None, imported: bool, src: dict[int, RankSource]
) -> str:
    """What the per-rank host/pid/agent columns are, for the kind of run it is: a launcher's
    placement, an import's files or numbering, or a recorded run's own records."""
    if placed:
        return "the machine and process each rank ran on, agent its device (launcher)"
    if not imported:
        if any(s.host or s.pid is not None or s.agent is not None for s in src.values()):
            return "the run's own records of each rank; unknown: not recorded"
        return (
            "unknown: the run's records do not say where each rank ran (a launcher that "
            "places the ranks records each one's host, pid and device)"
        )
    if source_format is None or source_format in ("csv", "rocpd", "json", "rocprof"):
        if any(isinstance(s.agent, str) and s.agent.startswith("GPU ") for s in src.values()):
            # rocprofv3 --agent-index type-relative: the agent is written as its GPU index
            return (
                "the folder of the rank's files in the import; agent: rocprofv3's Agent_Id as "
                "written with --agent-index type-relative (GPU N: the node's N-th GPU, from 0); "
                "unknown: not in the trace"
            )
        return (
            "the folder of the rank's files in the import; agent: rocprofv3's Agent_Id (the "
            "node's CPU agents are numbered first, so not a GPU index); unknown: not in the trace"
        )
    return (
        f"the ranks as the imported {source_format} numbers them; host, pid and agent: "
        "unknown where it does not say them"
    )


def _agree(per_rank: list[FleetRank], per_layer: list[FleetLayer]) -> bool:
    collapsed, fine, _ = _sides(per_rank)  # a rank not judged: on neither side
    return not (collapsed and fine) and all(p.S_min == p.S_max for p in per_layer)


def _engine_rows(
    engines: list[EngineGroup], per_rank: list[FleetRank], per_layer: list[FleetLayer]
) -> list[FleetEngine]:
    """The fleet view per engine: its ranks and what they run, its own S range and agreement."""
    out = []
    for e in engines:
        rows = [r for r in per_rank if r.rank in e.ranks]
        lo = [r.S_min for r in rows if r.S_min is not None]
        hi = [r.S_max for r in rows if r.S_max is not None]
        collapsed, _, unjudged = _sides(rows)
        layers = [p for p in per_layer if p.engine == e.engine]
        agree = _agree(rows, layers)
        compared = len(unjudged) < len(rows) or any(p.S_min is not None for p in layers)
        out.append(
            FleetEngine(
                engine=e.engine,
                ranks=list(e.ranks),
                heads=e.heads,
                qlen=list(e.qlen),
                paths=list(e.paths),
                # None: none recorded (never "none", which reads as a verdict)
                hosts=list(e.hosts) or None,
                pids=list(e.pids) or None,
                S_min=min(lo) if lo else None,
                S_max=max(hi) if hi else None,
                ranks_collapsed=collapsed if len(unjudged) < len(rows) else None,
                agree=agree,
                text=f"engine {e.engine} {describe_engine(e)}: {counted(len(rows), 'rank(s)')}, "
                + (_verdict(rows, layers) if compared else "nothing to compare"),
            )
        )
    return out


def _engines_line(
    engines: list[EngineGroup] | None, per_rank: list[FleetRank], per_layer: list[FleetLayer]
) -> str:
    rows = _engine_rows(engines or [], per_rank, per_layer)
    return (
        f"ranks: {len(per_rank)} in {len(rows)} engines (told apart by heads, qlen and path; "
        "never one fleet): " + "; ".join(r.text for r in rows)
    )


def _list(ranks: list[int]) -> str:
    return ranks_count(ranks) if ranks else "none"


def dp_group_rows(per_rank: list[FleetRank]) -> list[DpGroup]:
    """One row per data-parallel group (``dp_group`` None: the ranks whose group is unknown),
    never merged into one number: its ranks, hosts, the range of S its ranks used, and which of
    them collapsed."""
    # per engine (several engines in one trace): a group never spans two engines, nor does
    # the row of ranks whose group is unknown
    groups: dict[tuple[int | None, int | None], list[FleetRank]] = {}
    for r in per_rank:
        groups.setdefault((r.engine, r.dp_group), []).append(r)
    out = []
    order = sorted(groups.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1] is None, kv[0][1] or 0))
    for (eng, g), rows in order:
        lo = [r.S_min for r in rows if r.S_min is not None]
        hi = [r.S_max for r in rows if r.S_max is not None]
        caps = [r.S_grid_cap for r in rows if r.S_grid_cap is not None]
        collapsed, _, unjudged = _sides(rows)
        out.append(
            DpGroup(
                engine=eng,
                dp_group=g,
                ranks=[r.rank for r in rows],
                # None: no rank's host recorded (never "none")
                hosts=sorted({r.host for r in rows if r.host}) or None,
                S_min=min(lo) if lo else None,
                S_max=max(hi) if hi else None,
                # None: no rank of the group judged; the ranks not judged named beside
                ranks_collapsed=collapsed if len(unjudged) < len(rows) else None,
                ranks_not_judged=unjudged or None,
                S_grid_cap=max(caps) if caps and not lo else None,
            )
        )
    return out


def describe_engine(e: EngineGroup) -> str:
    """``ranks 0-3: 16 heads, qlen 4, aiter-asm (host node0)`` for an engine of
    :func:`mlaprof.analysis.engines.engine_groups`."""
    parts = [
        f"{e.heads} heads" if e.heads is not None else "heads unknown",
        f"qlen {'/'.join(map(str, e.qlen))}" if e.qlen else "qlen unknown",
        ", ".join(e.paths) if e.paths else "no MLA path",
    ]
    host = f" (host {', '.join(e.hosts)})" if e.hosts else ""
    return f"{rank_list(e.ranks)}: " + ", ".join(parts) + host

"""The fleet view: ranks side by side, never merged. Which ranks collapsed and which did not, and
S per layer across ranks (the range, and which ranks ran each S), from the per-rank layer rows of
:func:`mlaprof.analysis.layers.layer_table`."""

from __future__ import annotations

from typing import Any


def dp_groups(batches: dict[int, tuple[Any, ...]]) -> dict[int, int]:
    """Data-parallel groups where a trace can tell them: the ranks that ran the same batch rows
    at every step (tensor-parallel peers share a batch; DP groups serve their own). Groups are
    numbered in the order of their first rank; a rank with no batch record gets none."""
    out: dict[int, int] = {}
    seen: dict[tuple[Any, ...], int] = {}
    for rank in sorted(batches):
        sig = batches[rank]
        if sig:
            out[rank] = seen.setdefault(sig, len(seen))
    return out


def fleet_summary(
    ranks: list[int],
    layer_rows: list[dict[str, Any]],
    sources: list[dict[str, Any]] | None = None,
    batches: dict[int, tuple[Any, ...]] | None = None,
    trust: dict[int, str] | None = None,
) -> dict[str, Any]:
    """``{ranks, ranks_collapsed, ranks_not_collapsed, agree, per_rank, per_layer}``; each rank
    with its host, pid and GPU where the import recorded them (``sources``) and its DP group
    where the batches tell it (``batches``: rank -> batch rows per step)."""
    src = {s.get("rank"): s for s in sources or [] if isinstance(s, dict)}
    groups = dp_groups(batches or {}) if len(ranks) > 1 else {}
    per_rank = []
    for rank in ranks:
        rows = [r for r in layer_rows if r["rank"] == rank]
        used = [r["S_min"] for r in rows if r["S_min"] is not None]
        s = src.get(rank, {})
        per_rank.append(
            {
                "rank": rank,
                "host": s.get("host"),
                "pid": s.get("pid"),
                "agent": s.get("agent"),
                "dp_group": groups.get(rank),
                "trust": (trust or {}).get(rank),
                "layers": len(rows),
                "S_min": min(used) if used else None,
                "S_max": max(used) if used else None,
                "collapsed_layers": sum(1 for r in rows if r["collapsed"]),
                "collapsed_steps": sum(r["collapsed"] for r in rows),
            }
        )
    per_layer = []
    for layer in sorted({r["layer"] for r in layer_rows}):
        rows = [r for r in layer_rows if r["layer"] == layer]
        s = [r["S_min"] for r in rows if r["S_min"] is not None]
        times = [r["time_us"] for r in rows if r.get("time_us") is not None]
        by_s: dict[int, list[int]] = {}
        for r in rows:
            if r["S_min"] is not None:
                by_s.setdefault(r["S_min"], []).append(r["rank"])
        per_layer.append(
            {
                "layer": layer,
                "ranks": len(rows),
                # a range and the ranks behind each value, never a value no rank ran (a median
                # of 1, 1, 8, 8 is 4.5)
                "S_min": min(s) if s else None,
                "S_max": max(s) if s else None,
                "S_by_ranks": [{"S": v, "ranks": rank_span(rs)} for v, rs in sorted(by_s.items())],
                "time_us_min": min(times) if times else None,
                "time_us_max": max(times) if times else None,
            }
        )
    collapsed = [r["rank"] for r in per_rank if r["collapsed_layers"]]
    fine = [r["rank"] for r in per_rank if not r["collapsed_layers"]]
    agree = (not collapsed or len(collapsed) == len(ranks)) and all(
        p["S_min"] == p["S_max"] for p in per_layer
    )
    return {
        "ranks": len(ranks),
        "dp_groups": len(set(groups.values())) if groups else None,
        "dp_groups_source": "inferred: ranks that ran the same batch rows at every step"
        if groups
        else "unknown (one rank, or no batch rows recorded)",
        "ranks_collapsed": collapsed,
        "ranks_not_collapsed": fine,
        # ranks disagree when some collapsed and others did not, or their S differ per layer
        "agree": agree,
        # the one line every view prints
        "text": f"ranks: {len(ranks)}, all agree"
        if agree
        else f"ranks: {len(ranks)}, DISAGREE: collapsed on {_list(collapsed)}, not on "
        f"{_list(fine)}",
        "per_rank": per_rank,
        "per_layer": per_layer,
    }


def rank_span(ranks: list[int]) -> str:
    """``"0-3"`` for consecutive ranks, ``"0, 2, 5"`` otherwise, ``"0"`` for one."""
    rs = sorted(ranks)
    if len(rs) > 1 and rs == list(range(rs[0], rs[-1] + 1)):
        return f"{rs[0]}-{rs[-1]}"
    return ", ".join(map(str, rs))


def _list(ranks: list[int]) -> str:
    return f"{len(ranks)} (" + ", ".join(map(str, ranks)) + ")" if ranks else "none"

"""Where the time goes inside graph replays: GPU kernel time per layer and per kernel name, with
the attention (MLA) share. The layer rows and the time outside the layers are each rank's own:
ranks share a row only where every one of their layer rows reads the same (ranks never merged)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlaprof.analysis.grid import _origin
from mlaprof.analysis.sections import ReplayKernel, ReplayLayer, ReplayRank, TraceReplayTime
from mlaprof.analysis.timing import per_rank_us_text, us_reads
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import rank_span

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta

# Per kernel name of ``k`` (name, dur, mla): launches, total and median duration, whether any
# is an MLA kernel. The median comes from a (name, duration) histogram: DuckDB's MEDIAN keeps
# every value (11M durations of a 10M-kernel import) outside its memory cap, a grouped count is
# a hash aggregate that spills. lo/hi: the values at 1-based positions (n + 1) // 2 and
# n // 2 + 1 (one value for odd n), interpolated as DuckDB's quantile_cont(0.5) does.
NAME_STATS = """
SELECT name, SUM(c) AS n, SUM(d * c) AS total, lo + (hi - lo) * 0.5 AS med, BOOL_OR(mla) AS mla
FROM (
    SELECT name, d, c, mla,
           MIN(d) FILTER (WHERE cum >= (n + 1) // 2) OVER (PARTITION BY name) AS lo,
           MIN(d) FILTER (WHERE cum >= n // 2 + 1) OVER (PARTITION BY name) AS hi
    FROM (
        SELECT name, d, c, mla,
               SUM(c) OVER (PARTITION BY name ORDER BY d ROWS UNBOUNDED PRECEDING) AS cum,
               SUM(c) OVER (PARTITION BY name) AS n
        FROM (SELECT name, d, SUM(c) AS c, BOOL_OR(mla) AS mla FROM hist GROUP BY ALL)
    )
)
GROUP BY name, lo, hi"""

# Where the time goes inside graph replays, as DuckDB SQL over the kernels' Parquet files: each
# kept kernel takes the layer whose window holds its end (the layer of the same rank and step with
# the smallest end at or after it: an ASOF join on the rank's time line, whose steps follow each
# other, so a match in a later step means none in its own), summed per (rank, step, layer) in
# ``per`` (``win`` -1: after the step's last layer); then per layer and rank medians, per rank
# sums (its steps, its time after the last layer), per name totals and medians (NAME_STATS over
# ``hist``), the whole: each over ``per`` (a few rows per step), never a second kernel scan.
# ``jl`` is the analysis' own layer table (a drafter's layers already left out), scanned in place
# (NaN-free integers here are exact: the casts keep them so).
_KEPT = """
ly AS (
    SELECT CAST(rank AS BIGINT) AS rank, CAST(step AS BIGINT) AS step,
           CAST(layer AS BIGINT) AS layer,
           CAST(t_start_ns AS BIGINT) + CAST(duration_ns AS BIGINT) AS lend
    FROM jl WHERE t_start_ns IS NOT NULL AND duration_ns IS NOT NULL
),
k AS NOT MATERIALIZED (
    SELECT k.rank, k.step, k.replay, k.name, k.end_ns,
           CAST(k.end_ns - k.start_ns AS DOUBLE) AS dur, k.layer IS NOT NULL AS mla
    FROM kernels k SEMI JOIN (SELECT DISTINCT rank, step FROM ly) s
         ON k.rank = s.rank AND k.step = s.step
    WHERE k.replay IS NOT NULL
)"""
_PER = """
per AS MATERIALIZED (
    SELECT k.rank, k.step, COALESCE(CASE WHEN ly.step = k.step THEN ly.layer END, -1) AS win,
           SUM(k.dur) AS total, SUM(CASE WHEN k.mla THEN k.dur ELSE 0 END) AS att
    FROM k ASOF LEFT JOIN ly ON k.rank = ly.rank AND k.end_ns <= ly.lend
    GROUP BY ALL
)"""
_HIST = ", hist AS (SELECT name, dur AS d, COUNT(*) AS c, BOOL_OR(mla) AS mla FROM k GROUP BY ALL)"


def _figures(replays: str) -> str:
    """The figures from ``per`` and ``hist``; ``replays``: the SQL of the replay count."""
    return f"""
SELECT 'layer' AS part, CAST(win AS VARCHAR) || ':' || CAST(rank AS VARCHAR) AS key,
       COUNT(*) AS n, MEDIAN(total) AS a, MEDIAN(att) AS b, NULL AS c, NULL AS flag
FROM per WHERE win >= 0 GROUP BY win, rank
UNION ALL
SELECT 'rank', CAST(rank AS VARCHAR), COUNT(DISTINCT step), SUM(total), SUM(att),
       SUM(CASE WHEN win < 0 THEN total ELSE 0 END), NULL
FROM per GROUP BY rank
UNION ALL
SELECT 'name', name, n, total, med, NULL, mla FROM ({NAME_STATS})
UNION ALL
SELECT 'all', NULL, (SELECT COUNT(*) FROM (SELECT DISTINCT rank, step FROM per)),
       SUM(total), SUM(att), {replays}, NULL
FROM per
"""


_FIGURES = _HIST + _figures("(SELECT COUNT(*) FROM (SELECT DISTINCT rank, replay FROM k))")
# one rank: everything in one query
REPLAY_SQL = f"WITH {_KEPT},{_PER}{_FIGURES}"
# several ranks: the ASOF join one rank at a time (RANK_SQL: that rank's kernels sort and join in
# memory, where the whole fleet's 10M spilled past the query memory cap and took most of a fleet
# report), its ``per`` rows handed to FLEET_SQL as a frame (a few per step and layer: the size of
# the layer table); the names' histogram and the replays stay one spillable scan of every rank
RANK_SQL = f"WITH {_KEPT},{_PER} SELECT rank, step, win, total, att FROM per"
FLEET_SQL = f"WITH {_KEPT}{_FIGURES}"


_JL = ["rank", "step", "layer", "t_start_ns", "duration_ns"]
ONLY_MLA = (
    "every kernel inside the graph replays is an MLA kernel: a graph of attention alone, or a "
    "trace filtered to its MLA kernels (rocprofv3 --kernel-include-regex, a profiler's kernel "
    "filter); the shares are of the kernels the trace holds, not of a whole decoder layer's"
)


def _per_rows(run: Any, jl: pd.DataFrame) -> pd.DataFrame:
    """:data:`RANK_SQL` on each rank with layers, one rank at a time: the fleet's ``per``."""
    ranks = jl["rank"].to_numpy()
    parts = []
    for r in np.unique(ranks).tolist():
        p = run.query(RANK_SQL, frames={"jl": jl[ranks == r]}, ranks=[int(r)])
        parts.append(pd.DataFrame({c: p[c].to_numpy(np.float64 if c in ("total", "att")
                                                    else np.int64) for c in _PER_COLS}))  # fmt: skip
    return pd.concat(parts, ignore_index=True)


_PER_COLS = ["rank", "step", "win", "total", "att"]


def _pre_aggregated(run: Any, jl: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, int] | None:
    """The fleet's ``per``, the names' histogram and the replay count from the sums each rank's
    import stored (:mod:`mlaprof.analysis.replay_sums`), where every rank of ``jl`` has them
    and ``jl`` holds the very layers (and the store the very kernels) they were computed from;
    else None (the SQL then runs)."""
    from mlaprof.analysis import replay_sums
    from mlaprof.store import aggregates

    if not all(hasattr(run, a) for a in ("databases", "count_per_rank", "rank_meta")):
        return None  # not a stored run (a live follower): the SQL
    cols = {}
    for c in _JL:
        v = jl[c]
        if not pd.api.types.is_integer_dtype(v.dtype) or v.isna().any():
            return None  # NULL times (floats past 2**53 are not exact): the SQL's own casts
        cols[c] = v.to_numpy(np.int64)
    ranks = cols["rank"]
    roles = {(r, role) for r, role in run.databases}
    counts = run.count_per_rank("kernels")
    pers, hists, replays = [], [], 0
    for r in np.unique(ranks).tolist():
        if (r, "") not in roles or any(k[0] == r and k[1] for k in roles):
            return None  # another process's database of the rank holds rows the SQL would read
        got = aggregates.read(run, r, replay_sums.STEPS)
        hist = aggregates.read(run, r, replay_sums.HIST)
        if got is None or hist is None:
            return None
        sel = ranks == r
        lend = cols["t_start_ns"][sel] + cols["duration_ns"][sel]
        key = replay_sums.layer_key(cols["step"][sel], cols["layer"][sel], lend)
        stored = got[1]
        if {k: stored.get(k) for k in key} != key or stored.get("kernels") != counts.get(r):
            return None  # the analysis left steps out (a drafter's, warm-ups): not these sums
        replays += int(stored["replays"])
        t = got[0]
        pers.append(pd.DataFrame({"rank": np.full(t.num_rows, r, np.int64),
                                  **{c: t[c].to_numpy() for c in _PER_COLS[1:]}}))  # fmt: skip
        h = hist[0]
        hists.append(pd.DataFrame({"name": h["name"].to_pylist(),
                                   "d": h["d"].to_numpy().astype(np.float64),
                                   "c": h["c"].to_numpy(), "mla": h["mla"].to_numpy()}))  # fmt: skip
    if not pers:
        return None
    return pd.concat(pers, ignore_index=True), pd.concat(hists, ignore_index=True), replays


def _mode_s(layers: pd.DataFrame, keys: list[str]) -> dict[Any, int | None]:
    """The S most layer records of each ``keys`` group ran (None where the trace has none)."""
    ly = layers if "rank" in layers else layers.assign(rank=0)
    ly = ly[keys + ["splits_used"]]
    ly = ly[ly[keys].notna().all(axis=1)]  # as groupby drops a NULL key
    out: dict[Any, int | None] = dict.fromkeys(
        ((int(a), int(b)) for a, b in ly[keys].drop_duplicates().itertuples(index=False)), None
    )
    # counted per (group, S), then the most frequent S of each group, the smallest of a tie
    # (Series.mode's order): one grouped count, not a Python call per layer group
    n = ly.dropna(subset=["splits_used"]).groupby(keys + ["splits_used"]).size()
    n = n.reset_index(name="n").sort_values(
        keys + ["n", "splits_used"], ascending=[True, True, False, True]
    )
    for a, b, v in n.drop_duplicates(keys)[keys + ["splits_used"]].itertuples(index=False):
        out[(int(a), int(b))] = int(v)
    return out


def same_rows(sig: dict[int, Any]) -> list[list[int]]:
    """Ranks whose layer rows read the same (``sig``: rank -> its rows as a view reads them),
    one list per group, in order of first rank."""
    seen: dict[Any, list[int]] = {}
    for rank in sorted(sig):
        seen.setdefault(sig[rank], []).append(rank)
    return list(seen.values()) or [[0]]


def layer_rows(
    figs: dict[tuple[int, int], tuple[int, float, float]], s_by: dict[tuple[int, int], int | None]
) -> tuple[list[ReplayLayer], list[list[int]]]:
    """The layer rows from each rank's own figures (``figs``: (rank, layer) -> its steps and
    median kernel and attention time, ns): ranks share rows where each of their layers has the
    same S and reads the same times (:func:`~mlaprof.analysis.timing.us_reads`), else each rank
    has its own; in layer order, the groups of each layer in order of their first rank (a view
    that shows the first rows shows every group's). Also the groups."""
    by_rank: dict[int, list[tuple[int, int | None, float, float]]] = {}
    for (rank, lay), (_, tot, att) in sorted(figs.items()):
        s = s_by.get((rank, lay))
        by_rank.setdefault(rank, []).append(
            (lay, None if s is None or pd.isna(s) else int(s), us_reads(tot / 1e3),
             us_reads(att / 1e3))
        )  # fmt: skip
    groups = same_rows({r: tuple(v) for r, v in by_rank.items()})
    rows = []
    for ranks in groups:
        for lay, s_used, _, _ in by_rank[ranks[0]]:
            mine = [figs[(r, lay)] for r in ranks]
            # the ranks' values read the same: the row holds their median (one rank's: its own)
            tot = float(np.median([f[1] for f in mine]))
            att = float(np.median([f[2] for f in mine]))
            rows.append(
                ReplayLayer(
                    layer=lay,
                    ranks=ranks,
                    ranks_text=rank_span(ranks),
                    steps=sum(f[0] for f in mine),
                    median_us=tot / 1e3,
                    attention_median_us=att / 1e3,
                    attention_share=att / tot if tot else None,
                    S=s_used,
                )
            )
    first = {r: i for i, g in enumerate(groups) for r in g}
    rows.sort(key=lambda x: (x.layer, first[x.ranks[0]]))
    return rows, groups


def replay_time(meta: RunMeta, run: Any, layers: pd.DataFrame) -> TraceReplayTime:
    """Where the time goes inside graph replays: GPU kernel time per layer (a layer's window runs
    from the end of the MLA kernels of the layer before to the end of its own) and per kernel
    name, with the attention (MLA) share and the layer's S. Kernel time is summed busy time.
    One SQL query over every rank's kernels (:data:`REPLAY_SQL`; a fleet's ASOF join one rank
    at a time, :data:`RANK_SQL` then :data:`FLEET_SQL`); steps and replays are counted per
    rank."""
    empty = TraceReplayTime(replays=0, layers=[], kernels=[], attention_share=None,
                            provenance=_origin(meta))  # fmt: skip
    if layers.empty:
        return empty
    timed = layers["t_start_ns"].notna() & layers["duration_ns"].notna()
    if not timed.any():  # also the only case where those columns may hold objects (all None)
        return empty
    del timed
    # the five columns only (a lazy copy: pandas shares their data), never the text columns
    jl = layers[[c for c in _JL if c in layers]]
    if "rank" not in jl:
        jl = jl.assign(rank=0)
    s_by = _mode_s(layers, ["rank", "layer"])
    pre = _pre_aggregated(run, jl)
    if pre is not None:
        per, hist, replays = pre
        res = run.query(_figures(f"CAST({int(replays)} AS BIGINT)"),
                        frames={"per": per, "hist": hist})  # fmt: skip
        del per, hist
    elif jl["rank"].nunique() > 1:
        per = _per_rows(run, jl)
        res = run.query(FLEET_SQL, frames={"jl": jl, "per": per})
        del per
    else:
        res = run.query(REPLAY_SQL, frames={"jl": jl})
    parts = {p: g for p, g in res.groupby("part")}
    whole = parts["all"].iloc[0]
    if pd.isna(whole["a"]) or not whole["n"]:
        return empty
    lay_rows = parts.get("layer", res.iloc[:0])
    figs = {}
    for r in lay_rows.itertuples():
        lay, rank = (int(x) for x in str(r.key).split(":"))
        figs[(rank, lay)] = (int(r.n), float(r.a), float(r.b))
    out_layers, groups = layer_rows(figs, s_by)
    ranks = parts.get("rank", res.iloc[:0])
    ranks = ranks.assign(r=ranks["key"].astype(int)).sort_values("r")
    per_rank = [
        ReplayRank(
            rank=int(r.r),
            steps=int(r.n),
            outside_layers_us=float(r.c) / 1e3 / max(1, int(r.n)),
            attention_share=float(r.b) / float(r.a) if r.a else None,
        )
        for r in ranks.itertuples()
    ]
    total, att_total = float(whole["a"]), float(whole["b"])
    names = parts.get("name", res.iloc[:0]).sort_values(["a", "key"], ascending=[False, True])
    out_kernels = [
        ReplayKernel(
            name=str(r.key),
            launches=int(r.n),
            total_us=float(r.a) / 1e3,
            median_us=float(r.b) / 1e3,
            share=float(r.a) / total if total else None,
            attention=bool(r.flag),
        )
        for r in names.itertuples()
    ]
    # the mean over every rank's steps; each rank's own in per_rank, the text says both
    outside = float(ranks["c"].sum()) / 1e3 / max(1, int(whole["n"]))
    n_ranks = len({r.rank for r in per_rank})
    # the kernel rows and the attention share add every rank's launches: said, never silent
    said = over_ranks_label("sum", n_ranks)
    over = f"; kernels and attention share{said}" if said else ""
    return TraceReplayTime(
        replays=int(whole["c"]),
        # groups of ranks whose layer rows read the same: the layer rows are per group
        rank_groups=[rank_span(g) for g in groups],
        layers=out_layers,
        kernels=out_kernels,
        attention_share=att_total / total if total else None,
        # only MLA kernels inside the replays: the shares are of what the trace holds (a graph
        # of attention alone, or a trace filtered to its MLA kernels), said beside them
        attention_only=ONLY_MLA if out_kernels and all(k.attention for k in out_kernels) else None,
        outside_layers_us=outside,
        outside_layers_text=per_rank_us_text(
            outside, {r.rank: r.outside_layers_us for r in per_rank}
        ),  # fmt: skip
        per_rank=per_rank,
        provenance=f"{_origin(meta)}; GPU kernel time inside graph replays, summed busy time"
        + over,
    )

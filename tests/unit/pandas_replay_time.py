"""The pandas replay-time analysis mlaprof used before it ran as SQL (kept verbatim as the test
oracle of :func:`mlaprof.analysis.replay_time.replay_time`): per rank, a searchsorted over the
layers' ends, then pandas group-bys."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from mlaprof.analysis.replay_time import ONLY_MLA, _mode_s, layer_rows
from mlaprof.analysis.timing import per_rank_us_text
from mlaprof.analysis.typed_json import over_ranks_label, to_json
from mlaprof.rank_counts import rank_span


def _origin(meta: dict[str, Any]) -> str:
    return f"imported from {meta.get('imported_from') or '?'}"


KERNEL_COLUMNS = ["rank", "name", "start_ns", "end_ns", "step", "replay", "layer"]


def _windows(k: pd.DataFrame, ly: pd.DataFrame) -> np.ndarray | None:
    """Per kernel of one rank, the layer whose window holds its end (-1: none); None when the
    composite key would overflow (a trace spanning days; never seen in practice)."""
    step = k["step"].to_numpy(np.int64)
    t1k = k["end_ns"].to_numpy(np.int64)
    win = np.full(len(k), -1, np.int64)
    if ly.empty:
        return win
    tmin = int(min(t1k.min(), ly["end"].min()))
    span = int(max(t1k.max(), ly["end"].max())) - tmin + 1
    lstep = ly["step"].to_numpy(np.int64)
    if int(max(step.max(), lstep.max()) + 1) * span >= 2**62:
        return None
    lkey = lstep * span + (ly["end"].to_numpy(np.int64) - tmin)
    pos = np.searchsorted(lkey, step * span + (t1k - tmin), side="left")
    ok = pos < len(lkey)
    ok[ok] &= lstep[pos[ok]] == step[ok]
    win[ok] = ly["layer"].to_numpy(np.int64)[pos[ok]]
    return win


def pandas_replay_time(
    meta: dict[str, Any], kernels: pd.DataFrame | Iterable[pd.DataFrame], layers: pd.DataFrame
) -> dict:
    """Where the time goes inside graph replays: GPU kernel time per layer (a layer's window runs
    from the end of the MLA kernels of the layer before to the end of its own) and per kernel
    name, with the attention (MLA) share and the layer's S. Kernel time is summed busy time.
    ``kernels``: a DataFrame, or one per rank (a fleet import's 10M kernels are then never all
    in memory); steps and replays are numbered per rank."""
    empty = {"replays": 0, "layers": [], "kernels": [], "attention_share": None,
             "provenance": _origin(meta)}  # fmt: skip
    if layers.empty:
        return empty
    ly_all = layers.dropna(subset=["t_start_ns", "duration_ns"]).copy()
    ly_all["end"] = ly_all["t_start_ns"].astype(np.int64) + ly_all["duration_ns"].astype(np.int64)
    by_rank = dict(iter(ly_all.groupby("rank"))) if "rank" in ly_all else {}
    # each rank's figures here; ranks whose rows read the same share them (the library's
    # grouping rule, layer_rows: this oracle checks the aggregation, not that rule)
    s_by_rank = _mode_s(layers, ["rank", "layer"])
    frames = [kernels] if isinstance(kernels, pd.DataFrame) else kernels
    w_parts, durs, mlas, codes, seen_steps, seen_replays = [], [], [], [], [], []
    cats: dict[str, int] = {}
    tail = 0.0
    ranks_seen: dict[int, dict[str, float]] = {}
    for frame in frames:
        if "rank" not in frame or frame.empty:
            groups: Iterable[tuple[Any, pd.DataFrame]] = [(0, frame)]
        elif frame["rank"].nunique() == 1:  # one rank's frame: no split (no copy)
            groups = [(frame["rank"].iloc[0], frame)]
        else:
            groups = frame.groupby("rank")
        for rank, k in groups:
            # the kernels of the steps being analysed (a drafter's graphs are left out)
            ly = by_rank.get(rank, ly_all) if by_rank else ly_all
            keep = k["step"].notna() & k["replay"].notna() & k["step"].isin(ly["step"].unique())
            k = k if keep.all() else k[keep]
            if k.empty:
                continue
            win = _windows(k, ly.sort_values(["step", "end"]))
            if win is None:
                return empty
            dur = (k["end_ns"].to_numpy(np.int64) - k["start_ns"].to_numpy(np.int64)).astype(float)
            mla = k["layer"].notna().to_numpy()
            step = k["step"].to_numpy(np.int64)
            df = pd.DataFrame({"step": step, "layer": win, "dur": dur, "mla_dur": dur * mla})
            df["rank"] = int(rank)
            w_parts.append(
                df[df["layer"] >= 0]
                .groupby(["rank", "step", "layer"])
                .agg(total=("dur", "sum"), mla=("mla_dur", "sum"))
                .reset_index()
            )
            tail += float(dur[win < 0].sum())
            ranks_seen[int(rank)] = {"steps": len(np.unique(step)), "tail": float(dur[win < 0].sum()),
                                     "total": float(dur.sum()), "att": float((dur * mla).sum())}  # fmt: skip
            seen_steps.append(len(np.unique(step)))
            seen_replays.append(len(np.unique(k["replay"].to_numpy(np.int64))))
            # names as categories: a 10M-kernel fleet import holds a few dozen distinct names
            name = k["name"]
            if not isinstance(name.dtype, pd.CategoricalDtype):
                name = name.astype(str).astype("category")
            lut = [cats.setdefault(str(c), len(cats)) for c in name.cat.categories]
            lut = np.array(lut + [-1], np.int64)  # code -1 (no name) picks the trailing -1
            codes.append(lut[name.cat.codes.to_numpy()])
            durs.append(dur)
            mlas.append(mla)
    if not durs:
        return empty
    w = pd.concat(w_parts, ignore_index=True)
    dur = np.concatenate(durs)
    mla = np.concatenate(mlas)
    n_steps = sum(seen_steps)
    figs = {
        (int(rank), int(lay)): (int(len(g)), float(g["total"].median()), float(g["mla"].median()))
        for (rank, lay), g in w.groupby(["rank", "layer"])
    }
    rows, rank_groups = layer_rows(figs, s_by_rank)
    out_layers = [to_json(r) for r in rows]
    per_rank = [
        {
            "rank": r,
            "steps": int(v["steps"]),
            "outside_layers_us": v["tail"] / 1e3 / max(1, int(v["steps"])),
            "attention_share": v["att"] / v["total"] if v["total"] else None,
        }
        for r, v in sorted(ranks_seen.items())
    ]
    outside = tail / 1e3 / max(1, n_steps)
    names = pd.Categorical.from_codes(np.concatenate(codes), categories=list(cats))
    kn = pd.DataFrame({"name": names, "dur": dur, "mla": mla})
    g = kn.groupby("name", observed=True).agg(launches=("dur", "size"), total=("dur", "sum"),
                                              med=("dur", "median"), mla=("mla", "any"))  # fmt: skip
    total = float(kn["dur"].sum())
    g = g.sort_values("total", ascending=False)
    out_kernels = [
        {
            "name": str(r.Index),
            "launches": int(r.launches),
            "total_us": float(r.total) / 1e3,
            "median_us": float(r.med) / 1e3,
            "share": float(r.total) / total if total else None,
            "attention": bool(r.mla),
        }
        for r in g.itertuples()
    ]
    return {
        "replays": int(sum(seen_replays)),
        "rank_groups": [rank_span(g) for g in rank_groups],
        "layers": out_layers,
        "kernels": out_kernels,
        "attention_share": float(kn.loc[kn["mla"], "dur"].sum()) / total if total else None,
        "outside_layers_us": outside,
        "outside_layers_text": per_rank_us_text(
            outside, {r["rank"]: r["outside_layers_us"] for r in per_rank}
        ),
        "per_rank": per_rank,
        # every kernel inside the replays is an MLA kernel (decided here from the kernels read)
        **({"attention_only": ONLY_MLA} if bool(kn["mla"].all()) else {}),
        "provenance": f"{_origin(meta)}; GPU kernel time inside graph replays, summed busy time"
        + (
            f"; kernels and attention share{said}"
            if (said := over_ranks_label("sum", set(ranks_seen)))
            else ""
        ),
    }

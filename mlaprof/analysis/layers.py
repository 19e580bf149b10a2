"""Per rank and layer: S used, the S it is judged against, how many steps collapsed, and the
syncs per watched step. The TUI's layer table and drill-down, the report and ``--json`` show
these rows; ``run.layers.syncs`` holds the same sync count (:mod:`mlaprof.store.reader`)."""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.splits import is_collapsed
from mlaprof.sync_kinds import SYNC


def reference_s(layers: pd.DataFrame, fix_by_step: pd.DataFrame | None) -> pd.Series:
    """The S each layer record is judged against: what its real rows deserve where the run knows
    it, else (an imported trace, whose grid counts padding rows) the S the fix gives for the
    same rows (``fix_by_step``: rank, step, fix)."""
    ref = pd.to_numeric(layers["splits_deserved"], errors="coerce")
    if fix_by_step is not None and not fix_by_step.empty:
        fix = layers[["rank", "step"]].merge(fix_by_step, on=["rank", "step"], how="left")["fix"]
        ref = ref.fillna(pd.Series(fix.to_numpy(), index=layers.index))
    return ref


def layer_table(
    layers: pd.DataFrame, syncs: pd.DataFrame, fix_by_step: pd.DataFrame | None = None
) -> list[dict]:
    """``[{rank, layer, steps, time_us, S_used, S_min, S_reference, reference, collapsed,
    syncs}]``; ``None`` where the run does not hold a value (``reference`` says which S the
    collapse is judged against, or why none)."""
    if layers.empty:
        return []
    ly = layers.copy()
    ly["ref"] = reference_s(ly, fix_by_step)
    used = pd.to_numeric(ly["splits_used"], errors="coerce")
    ly["collapsed"] = [is_collapsed(u, r) for u, r in zip(used, ly["ref"], strict=True)]
    has_deserved = ly["splits_deserved"].notna()
    watched = syncs[syncs["kind"] == SYNC] if not syncs.empty else syncs
    per_step = syncs.groupby("rank")["step"].nunique() if not syncs.empty else pd.Series()
    n_sync = watched.groupby(["rank", "layer"]).size() if not watched.empty else pd.Series()
    out = []
    for (rank, layer), g in ly.groupby(["rank", "layer"], sort=True):
        last = g.iloc[-1]
        u = pd.to_numeric(g["splits_used"], errors="coerce").dropna()
        ref = g["ref"].dropna()
        why = (
            "deserved by the real rows"
            if has_deserved.loc[g.index].any()
            else "the fix's S for the same rows (the grid counts padding rows)"
            if not ref.empty
            else "unknown (no deserved S and no modelled fix for this path)"
        )
        steps_watched = per_step.get(rank)
        out.append(
            {
                "rank": int(rank),
                "layer": int(layer),
                "steps": int(len(g)),
                "time_us": float(g["duration_ns"].mean()) / 1e3
                if g["duration_ns"].notna().any()
                else None,
                "S_used": _i(last["splits_used"]),
                "S_min": None if u.empty else int(u.min()),
                "S_reference": _i(last["ref"]),
                "reference": why,
                "collapsed": int(g["collapsed"].sum()),
                "syncs": None
                if not steps_watched
                else float(n_sync.get((rank, layer), 0)) / steps_watched,
            }
        )
    return out


def _i(v: object) -> int | None:
    return None if v is None or pd.isna(v) else int(v)

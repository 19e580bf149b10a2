"""Which graph each step of an imported trace belongs to, from the trace itself: the target
model's verify passes, a speculative drafter's passes, or other graphs.

A speculative drafter (MTP ``deepseek_mtp``, EAGLE) runs its own small graphs between the verify
steps: one or a few MLA layers, decode kernels at qlen 1 after its first pass. The target's
verify graph holds every MLA layer of the model. Per rank, a step is the drafter's when it has
at most a quarter of the rank's deepest step's MLA layers (at least one), or qlen 1 and fewer
layers than that step; every other step is a verify step (a replay that lost a few dispatches
keeps most of its layers and its qlen, so it stays a verify step and the trust check judges it).
"""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.imported import value_range
from mlaprof.analysis.step_stats import for_steps

VERIFY, DRAFTER = "verify", "drafter"


def graph_kinds(steps: pd.DataFrame, stats: pd.DataFrame) -> pd.Series:
    """``verify`` or ``drafter`` per row of ``steps`` (indexed like it); ``stats``: the per-step
    aggregates of the layers (:mod:`mlaprof.analysis.step_stats`)."""
    if steps.empty:
        return pd.Series(dtype=object)
    per = for_steps(steps, stats, "n_layers").fillna(0)
    deepest = per.groupby(steps["rank"]).transform("max")
    few = per <= (deepest // 4).clip(lower=1)
    decode = steps["qlen"].eq(1) & (per < deepest)
    drafter = (few & (per < deepest)) | decode
    return pd.Series(drafter.map({True: DRAFTER, False: VERIFY}), index=steps.index)


def drafter_summary(steps: pd.DataFrame, stats: pd.DataFrame, origin: str) -> dict | None:
    """The drafter's passes, their own table (decode: never counted as verify steps)."""
    if steps.empty:
        return None
    backend = steps["backend"].fillna("").astype(str)
    out = {
        "steps": int(len(steps)),
        "graph_steps": int((steps["graph_mode"] == "graph").sum()),
        "eager_steps": int((steps["graph_mode"] == "eager").sum()),
        "variants": sorted({b.split(" ", 1)[-1] for b in backend if b}),
        "layers_per_pass": value_range(for_steps(steps, stats, "n_layers")),
        "S": value_range(for_steps(steps, stats, "S")),
        "rows": value_range(steps["num_reqs"]),
        "qlen": value_range(steps["qlen"]),
        "step_median_us": float(steps["duration_ns"].median()) / 1e3
        if steps["duration_ns"].notna().any()
        else None,
        "provenance": f"{origin}; drafter passes told from verify steps by their MLA layer count "
        "and qlen",
    }
    med = out["step_median_us"]
    out["text"] = (
        f"drafter passes (the drafter's own graphs, not verify steps): {out['steps']} "
        f"({out['graph_steps']} graph / {out['eager_steps']} eager), "
        f"{', '.join(out['variants']) or 'unknown kernel'}, {out['layers_per_pass'] or 'unknown'} "
        f"MLA layer(s) per pass, S {out['S'] or 'unknown'}, rows {out['rows'] or 'unknown'}, "
        f"qlen {out['qlen'] or 'unknown (not on the grid)'}, median pass "
        + ("unknown" if med is None else f"{med:.1f} us")
    )
    return out

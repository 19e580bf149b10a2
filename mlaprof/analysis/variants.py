"""Which attention path and kernel variant ran, per (path, variant): steps, how they ran, S,
batch rows and qlen with where each came from; and variant switches within one path family."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _origin, _split_backend, value_range
from mlaprof.analysis.run_checks import RunChecks
from mlaprof.analysis.sections import TracePath
from mlaprof.analysis.step_stats import for_steps
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import counted, plural

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import GridAxes, RunMeta


def trace_paths(
    meta: RunMeta,
    steps: pd.DataFrame,
    stats: pd.DataFrame,
    engine_of: dict[int, int] | None = None,
    checks: RunChecks | None = None,
) -> list[TracePath]:
    """Per (path, kernel variant): steps, how they ran, S, batch rows and qlen with provenance
    (``stats``: :mod:`mlaprof.analysis.step_stats`). ``engine_of`` (rank -> engine, where a
    trace shows several engines): one row per engine too, so no row folds two engines' S."""
    if steps.empty or "backend" not in steps:
        return []
    st = _split_backend(steps[steps["backend"].notna()])
    st["S"] = for_steps(st, stats, "S")
    st["layer_median_ns"] = for_steps(st, stats, "median_ns")
    st["engine"] = st["rank"].map(engine_of) if engine_of else -1
    out = []
    for (path, variant, eng), g in st.groupby(["path", "variant", "engine"], sort=False):
        p = meta.stage1_axes.get(path)  # None: no matched stage-1 kernel row
        axis = p and p.split_axis
        if axis == "device":
            s_val = "decided on the device"
            s_src = (
                "decided on the device (persistent work split, get_mla_metadata_v1); not on "
                "the grid"
            )
        elif axis:
            s_val = value_range(g["S"]) or "unknown"
            s_src = f"from grid axis {axis} of {variant} ({_origin(meta)})"
        else:
            s_val, s_src = "unknown", f"no grid axis holds S for {variant}"
        med = g["layer_median_ns"].median()
        out.append(
            TracePath(
                path=path,
                variant=variant,
                steps=int(len(g)),
                graph_steps=int((g["graph_mode"] == "graph").sum()),
                piecewise_steps=int((g["graph_mode"] == "piecewise").sum()),
                eager_steps=int((g["graph_mode"] == "eager").sum()),
                S=s_val,
                S_source=s_src,
                rows=value_range(g["num_reqs"]),
                rows_source=(
                    f"grid axis {p.rows_axis} of {variant} (padding rows included)"
                    if p and p.rows_axis
                    else "not on the grid"
                ),
                qlen=value_range(g["qlen"]),
                qlen_source=_qlen_source(checks or RunChecks(), path, variant, p),
                layer_median_us=None if pd.isna(med) else float(med) / 1e3,
                ranks=sorted(int(r) for r in g["rank"].unique()),
                provenance=_origin(meta),
                engine=int(eng) if engine_of else None,
            )
        )
    return out


def _qlen_source(checks: RunChecks, path: str, variant: str, p: GridAxes | None) -> str:
    """Where qlen comes from: the stage-2 grid (exact) where a layer has one, else stage 1's."""
    if p is None or not p.qlen_axis:
        return "not on the grid"
    q = checks.group("qlen")  # summed over the ranks: said so after each count
    summed = over_ranks_label("sum", len(checks.ranks()))
    s1 = f"grid axis {p.qlen_axis} of {variant}"
    if path != "aiter-gluon":
        return s1
    n2, n1 = int(q.get("from_stage2", 0)), int(q.get("from_stage1", 0))
    parts = []
    if n2:
        parts.append(
            f"stage 2's grid axis z ((B, H, qlen), exact) on {n2}{summed} {plural('layer(s)', n2)}"
        )
    if n1 or not n2:
        parts.append(
            f"{s1} on {n1}{summed} {plural('layer(s)', n1)} without stage 2 (qlen below 16 heads, "
            "as vLLM "
            "routes verify; ceil(H/16)*qlen from aiter v0.1.20 on with more heads: ambiguous "
            "there)"
        )
    if q.get("stage1_disagrees"):
        parts.append(
            f"stage 1's z differs on {q['stage1_disagrees']}{summed} "
            f"{plural('layer(s)', q['stage1_disagrees'])}: ceil(H/16)*qlen "
            "with more than 16 heads (aiter v0.1.20+)"
        )
    return "; ".join(parts)


def variant_findings(origin: str, paths: list[TracePath]) -> list[Finding]:
    """More than one kernel variant of one attention path family in one trace (e.g. the
    persistent ASM kernel for small batches, the non-persistent one past 32 rows); ``origin``:
    where the trace came from (RunMeta.origin)."""
    # per engine where a trace shows several (two engines' kernels are not one switch)
    fam: dict[tuple[str, Any], list[TracePath]] = {}
    for p in paths:
        fam.setdefault((p.path.split("-persistent")[0], p.engine), []).append(p)
    out = []
    for (family, _engine), ps in fam.items():
        if len({p.variant for p in ps}) < 2:
            continue
        parts = [
            # a path's steps add its ranks' (said so, in the sections' one wording)
            f"{p.variant} on {counted(p.steps, 'step(s)')}"
            + over_ranks_label("sum", p.ranks)
            + f" (batch rows {p.rows or 'not on its grid'}"
            + (f", median layer {p.layer_median_us:.1f} us" if p.layer_median_us else "")
            + ")"
            for p in ps
        ]
        persistent = any(p.path.endswith("-persistent") for p in ps)
        out.append(
            Finding(
                kind="variant",
                severity="info",
                title=f"{family}: the kernel variant switches across batch sizes ({len(ps)} variants)",
                evidence="; ".join(parts)
                + f" ({origin})"
                + (
                    ". AITER takes the persistent kernel below AITER_MLA_DECODE_PERSISTENT_MAX_"
                    "BATCH rows (default 32) and the non-persistent one at or above it"
                    if persistent
                    else ""
                ),
                fix=(
                    "compare the variants' layer times at your batch sizes; pin one with "
                    "AITER_MLA_DECODE_PERSISTENT_MAX_BATCH if the switch costs time"
                    if persistent
                    else "check why batch sizes select different kernels"
                ),
                data={"family": family, "variants": [p.variant for p in ps]},
            )
        )
    return out

"""Adapter for an imported rocprofv3 / Kineto trace: paths, S, capture and sync verdicts only
from the trace's own evidence, per rank (:mod:`mlaprof.analysis.imported`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.coverage import coverage_summary, explain_syncs
from mlaprof.analysis.evidence.common import capture, load_tables
from mlaprof.analysis.evidence.model import CaptureStatus, Evidence, Provenance
from mlaprof.analysis.graph_kinds import DRAFTER, drafter_summary, graph_kinds
from mlaprof.analysis.imported import imported_summary
from mlaprof.analysis.step_stats import step_stats_sql
from mlaprof.store.runkind import RunKind

if TYPE_CHECKING:
    from mlaprof.store.reader import Run


def _of_steps(rows: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``rows`` that belong to ``steps`` (by rank and step)."""
    if rows.empty:
        return rows
    keep = pd.MultiIndex.from_arrays([steps["rank"], steps["step"]])
    return rows[pd.MultiIndex.from_arrays([rows["rank"], rows["step"]]).isin(keep)]


def trace_evidence(run: Run) -> Evidence:
    t = load_tables(run)
    src = run.meta.get("imported_from")
    prov = Provenance("imported", f"from {src}" if src else "from a trace")
    # the drafter's own graphs get their own table; every analysis below sees verify steps only
    # per step: its layers, S and median layer time, aggregated in the database once
    stats = step_stats_sql(run)
    # a CPU trace's steps are vLLM's own step annotations (some with no request): no drafter graph
    kinds = (
        graph_kinds(t["steps"], stats, run.meta) if not run.meta.get("cpu_trace") else pd.Series()
    )
    drafting = t["steps"][kinds == DRAFTER] if len(kinds) else t["steps"].iloc[0:0]
    drafter = drafter_summary(drafting, stats, str(prov))
    if not drafting.empty:
        t["steps"] = t["steps"][kinds != DRAFTER]
        t["layers"] = _of_steps(t["layers"], t["steps"])
    tr = imported_summary(run, t["steps"], t["layers"], stats)
    tr["drafter"] = drafter if not drafting.empty else None
    tr["coverage"] = coverage_summary(run, run.meta, tr["paths"], t["layers"])
    tr["syncs"] = explain_syncs(tr["syncs"], tr["coverage"])
    reference = tr.pop("layer_reference")
    c = dict(tr["capture"])
    status = CaptureStatus(c.pop("status"))
    c.pop("label", None)
    prov_text = str(c.pop("provenance", prov))
    cap = capture(status, prov_text, why=str(c.get("evidence") or ""), **c)
    tr["capture"] = cap
    device = str(run.meta.get("device") or "")
    return Evidence(
        kind=RunKind.TRACE,
        name=run.name,
        status=run.status,
        meta=run.meta,
        ranks=run.ranks,
        tables=t,
        capture=cap,
        device=device or "unknown (the trace does not name its device)",
        provenance=prov,
        trace=tr,
        reference=reference,
        step_stats=stats,
    )

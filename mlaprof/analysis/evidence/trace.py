"""Adapter for an imported rocprofv3 / Kineto trace: paths, S, capture and sync verdicts only
from the trace's own evidence, per rank. The trace's rows (steps and layers read off kernel
grids, host calls from its API and copy records) go to the same per-question analyzers every run
kind's rows go to; the ``trace`` section gathers what they say about them for the views."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from mlaprof.analysis.capture import step_mode_evidence
from mlaprof.analysis.capture_phase import capture_phase
from mlaprof.analysis.collapse import layer_reference
from mlaprof.analysis.coverage import coverage_summary, explain_syncs
from mlaprof.analysis.cpu_attention import cpu_trace_summary
from mlaprof.analysis.drafter import DRAFTER, drafter_summary, graph_kinds
from mlaprof.analysis.engines import engine_groups, signatures
from mlaprof.analysis.evidence.common import load_tables
from mlaprof.analysis.evidence.model import Evidence, Provenance, RunMeta, run_meta
from mlaprof.analysis.replay_time import replay_time
from mlaprof.analysis.run_checks import RunChecks
from mlaprof.analysis.sections import TraceSection, TraceTrust
from mlaprof.analysis.step_stats import step_stats_sql
from mlaprof.analysis.steps import trace_steps
from mlaprof.analysis.syncs import D2H_OPS, SYNC_CALLS, sync_evidence
from mlaprof.analysis.trust import fleet_trust, rank_trusts, trust_summary
from mlaprof.analysis.variants import trace_paths
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
    # the import's checks, each rank's, from the store (the analyzers below decide from them)
    checks = RunChecks.of(run)
    # run.json's part, read once (the analyzers read it typed)
    meta = run_meta(run.meta)
    src = meta.imported_from
    prov = Provenance("imported", f"from {src}" if src else "from a trace")
    # a whole-process trace's capture phase (warm-ups, stream captures) is not served steps
    phase, warm = capture_phase(run, t["steps"])
    if warm.any():
        t["steps"] = t["steps"][~warm]
        t["layers"] = _of_steps(t["layers"], t["steps"])
    # the drafter's own graphs get their own table; every analysis below sees verify steps only
    # per step: its layers, S and median layer time, aggregated in the database once
    stats = step_stats_sql(run)
    # a CPU trace's steps are vLLM's own step annotations (some with no request): no drafter graph
    kinds = graph_kinds(t["steps"], stats, checks) if not meta.cpu_trace else pd.Series()
    drafting = t["steps"][kinds == DRAFTER] if len(kinds) else t["steps"].iloc[0:0]
    drafter = drafter_summary(drafting, stats, str(prov))
    if not drafting.empty:
        t["steps"] = t["steps"][kinds != DRAFTER]
        t["layers"] = _of_steps(t["layers"], t["steps"])
    # what each rank runs tells engines apart (two models on one host are not DP peers)
    engines = (
        engine_groups(signatures(run, t["steps"]), meta.rank_sources)
        if len(run.ranks) > 1
        else None
    )
    engine_of = {r: e.engine for e in engines or [] for r in e.ranks}
    # each rank judged on its own dispatches (a fleet import records them per rank)
    per_rank = rank_trusts(meta, t["steps"], checks)
    section, reference = trace_section(
        run,
        meta,
        t["steps"],
        t["layers"],
        stats,
        engine_of if len(engines or []) > 1 else None,
        checks,
        per_rank,
    )
    # the parts decided apart from the trace's verify steps: the drafter's passes, the start-up
    section = replace(section, drafter=drafter, capture_phase=phase)
    cap = section.capture
    device = meta.device or ""
    return Evidence(
        kind=RunKind.TRACE,
        name=run.name,
        status=run.status,
        meta=replace(meta, trace_checks=section.checks),
        ranks=run.ranks,
        tables=t,
        capture=cap,
        device=device or "unknown (the trace does not name its device)",
        provenance=prov,
        trace=section,
        reference=reference,
        step_stats=stats,
        kernel_paths=section.paths,
        step_modes=cap,
        trust=section.trust,
        trust_by_rank=section.trust_by_rank,
        rank_trust=per_rank,
        host_syncs=section.syncs,
        coverage=section.coverage,
        cpu=section.cpu,
        engines=engines,
    )


def host_calls(run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trace's host sync calls (API records) and device-to-host copies (copy records), read
    in one query over every rank."""
    like = " OR ".join("operation LIKE ?" for _ in D2H_OPS)
    both = run.query(
        "SELECT rank, 'api' AS src, function AS op, start_ns, end_ns FROM api WHERE function IN ("
        + ", ".join("?" * len(SYNC_CALLS))
        + ") UNION ALL SELECT rank, 'copy' AS src, operation AS op, start_ns, end_ns "
        f"FROM transfers WHERE kind LIKE 'MEMORY_COPY%' AND ({like}) ORDER BY rank, start_ns",
        (*SYNC_CALLS, *(f"%{o}%" for o in D2H_OPS)),
    )
    cols = ["rank", "op", "start_ns", "end_ns"]
    api = both.loc[both["src"] == "api", cols].rename(columns={"op": "function"})
    copies = both.loc[both["src"] == "copy", cols].rename(columns={"op": "operation"})
    return api.reset_index(drop=True), copies.reset_index(drop=True)


def trace_section(
    run: Run,
    meta: RunMeta,
    steps: pd.DataFrame,
    layers: pd.DataFrame,
    stats: pd.DataFrame,
    engine_of: dict[int, int] | None = None,
    checks: RunChecks | None = None,
    per_rank: dict[int, TraceTrust] | None = None,
) -> tuple[TraceSection, pd.DataFrame]:
    """Everything the views show about an imported trace, each part its question's analyzer's
    section (computed once), and the S its steps are judged against (:func:`layer_reference`);
    ``stats``: the per-step aggregates of the layers
    (:func:`mlaprof.analysis.step_stats.step_stats_sql`); ``meta``: run.json's part, typed.
    ``per_rank``: each rank's trust (:func:`mlaprof.analysis.trust.rank_trusts`, made here
    where the caller does not hold it). The adapter gathers; the analyzers decide."""
    checks = checks if checks is not None else RunChecks.of(run)
    if per_rank is None:
        per_rank = rank_trusts(meta, steps, checks)
    api, copies = host_calls(run)
    cap = step_mode_evidence(meta, steps, checks)
    paths = trace_paths(meta, steps, stats, engine_of, checks)
    coverage = coverage_summary(run, meta, paths, layers, steps)
    section = TraceSection(
        source=meta.imported_from,
        format=meta.format or meta.source,
        paths=paths,
        # a step reads FULL only where the capture verdict does (a graph-launch call confirms)
        steps=trace_steps(steps, stats, bool(cap.graph_launches)),
        capture=cap,
        # the whole trace's verdict; where ranks have their own, its reasons are theirs
        trust=fleet_trust(trust_summary(meta, cap, checks), per_rank),
        # each rank judged on its own dispatches (a fleet import records them per rank)
        trust_by_rank={r: t.verdict for r, t in per_rank.items()},
        # one query over the kernels' files (a fleet import holds 10M kernels)
        replay_time=replay_time(meta, run, layers),
        # an unknown verdict says what the API trace held and why it cannot judge
        syncs=explain_syncs(sync_evidence(meta, steps, layers, api, copies, checks), coverage),
        # summed over the ranks (each rank's stay in the store's trace_checks table)
        checks=checks.section(cpu=meta.device == "cpu"),
        coverage=coverage,
        # a CPU-only trace: steps from vLLM's annotations, attention from its CPU MLA op
        cpu=cpu_trace_summary(meta, steps, layers),
        drafter=None,
    )
    return section, layer_reference(checks.group("heads"), steps, stats)

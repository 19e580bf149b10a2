"""Can a trace be trusted, per rank from that rank's evidence only: replays missing kernels,
graph launches with no kernel, split layers without their reduction; and the mark every finding
drawn from an unreliable trace carries."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlaprof.analysis.capture import step_mode_evidence
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.grid import _origin
from mlaprof.analysis.run_checks import RunChecks
from mlaprof.analysis.sections import Capture, TraceTrust, TraceTrustCounts
from mlaprof.analysis.share import share_text
from mlaprof.rank_counts import counted, rank_list, ranks_of
from mlaprof.step_sources import SOURCE_GAPS, SOURCE_TEXT
from mlaprof.store.trace_checks import RECORDS

if TYPE_CHECKING:
    from mlaprof.analysis.evidence.model import RunMeta

ROCM_72_LOSS = "ROCm 7.2.0-7.2.1 lost 26-65% of graph-replay dispatches (fixed in 7.2.2)"


# the counts in the order the trust finding's data lists them (the last two only where found)
COUNTS = (
    "replays",
    "short_replays",
    "missing_kernels",
    "expected_kernels",
    "steps_missing_layers",
    "steps_layers_aligned",
    "steps_layers_unknown",
    "eager_steps_missing_layers",
    "eager_steps_layers_aligned",
    "eager_steps_layers_unknown",
    "launches_without_kernels",
    "eager_steps_between_replays",
    "split_layers_without_stage2",
    "edge_partial_steps",
    "repeated_dispatches",
    "nameless_dispatches",
)


def trust_summary(meta: RunMeta, cap: Capture, run_checks: RunChecks | None = None) -> TraceTrust:
    """Can this trace be trusted: replays missing kernels against the complete replays of
    their own graph, graph launches with no kernel, split layers without their reduction.
    Partial steps at the window's edges are left out and said, never a loss; steps that ran
    without a FULL graph are a capture finding, not a fault of the trace. Counts from the
    import's checks (``run_checks``, summed over its ranks); "unknown" for imports that
    predate them."""
    run_checks = run_checks if run_checks is not None else RunChecks()
    checks = run_checks.checks_dict()
    records = _records(run_checks)
    if not checks and not any(records.values()):
        return unknown_trust(meta)
    rc, lc = checks.get("replays", {}), checks.get("launches", {})
    split_no_s2 = sum(v.get("split_without_stage2", 0) for v in checks.get("stage2", {}).values())
    counts = {
        "replays": rc.get("replays", 0),
        "short_replays": rc.get("short_replays", 0),
        "missing_kernels": rc.get("missing_kernels", 0),
        "expected_kernels": rc.get("expected_kernels", 0),
        "steps_missing_layers": rc.get("steps_missing_layers", 0),
        # how the steps short of layers were numbered (imports that found some say)
        "steps_layers_aligned": rc.get("steps_layers_aligned"),
        "steps_layers_unknown": rc.get("steps_layers_unknown"),
        "eager_steps_missing_layers": rc.get("eager_steps_missing_layers"),
        "eager_steps_layers_aligned": rc.get("eager_steps_layers_aligned"),
        "eager_steps_layers_unknown": rc.get("eager_steps_layers_unknown"),
        "launches_without_kernels": lc.get("launches_without_kernels") or 0,
        "eager_steps_between_replays": _eager_between_replays(cap),
        "split_layers_without_stage2": split_no_s2,
        "edge_partial_steps": rc.get("edge_partial_steps", 0),
        # said only where the import found some (runs imported before these counts have none)
        **{k: records[k] for k in ("repeated_dispatches", "nameless_dispatches") if records[k]},
    }
    reasons = []
    if counts["short_replays"]:
        pct = share_text(counts["missing_kernels"] / max(1, counts["expected_kernels"]))
        reasons.append(
            f"{counts['short_replays']} of {counts['replays']} graph replays miss kernels "
            f"against their own graph's complete replays ({counts['missing_kernels']} of "
            f"{counts['expected_kernels']} dispatches, {pct}; "
            f"{counted(counts['steps_missing_layers'], 'step(s)')} short of "
            f"layers{_layer_numbering(counts)}); "
            f"{ROCM_72_LOSS}"
        )
    if counts["eager_steps_missing_layers"]:
        reasons.append(
            f"{counted(counts['eager_steps_missing_layers'], 'eager step(s)')} short of MLA layers "
            "against "
            "eager steps running their kernels (the trace lost dispatches)"
            + _layer_numbering(counts, "eager_", "a complete eager step running the same kernels")
        )
    if counts["launches_without_kernels"]:
        reasons.append(
            f"{counted(counts['launches_without_kernels'], 'graph launch(es)')} in the API trace "
            "with no "
            "kernel in the kernel trace"
        )
    if split_no_s2:
        reasons.append(
            f"{counted(split_no_s2, 'layer(s)')} with S > 1 but no stage-2 / reduce kernel"
        )
    if records["nameless_dispatches"]:
        reasons.append(
            f"{records['nameless_dispatches']} of {records['dispatches']} dispatches name a "
            "kernel symbol the trace lacks (stored without a name: not attributed to a layer)"
        )
    notes = []
    if records["repeated_dispatches"]:
        notes.append(
            f"{counted(records['repeated_dispatches'], 'dispatch record(s)')} repeated in the "
            "trace (same "
            "dispatch id and fields): each dispatch counted once"
        )
    if counts["edge_partial_steps"]:
        notes.append(
            f"{counted(counts['edge_partial_steps'], 'partial step(s)')} at the window edges, not "
            "analysed "
            "(the collection window cut them: not counted as a loss)"
        )
    gaps = _gap_ranks(run_checks)
    if gaps is not None:
        notes.append(f"steps{gaps} told apart by {SOURCE_TEXT[SOURCE_GAPS]}")
    return TraceTrust(
        counts=TraceTrustCounts(**counts),
        reasons=reasons,
        reliable=not reasons,
        verdict="unreliable" if reasons else "reliable",
        notes=notes,
        provenance=_origin(meta),
    )


def _layer_numbering(
    counts: dict[str, Any], kind: str = "", to: str = "their graph's complete replays"
) -> str:
    """How the steps short of layers were numbered: which layer is missing is said only where
    the import placed the step's kernels in its graph's complete replays (``kind`` "eager_":
    in a complete eager step running the same kernels; never counted from 0 over what is
    left)."""
    parts = []
    if counts.get(f"{kind}steps_layers_aligned"):
        parts.append(
            f"{counts[f'{kind}steps_layers_aligned']} numbered by aligning their kernel sequence "
            f"to {to}"
        )
    if counts.get(f"{kind}steps_layers_unknown"):
        parts.append(
            f"in {counts[f'{kind}steps_layers_unknown']} a layer is missing; which one is "
            "unknown, and the layers the trace cannot place are left out of the per-layer figures"
        )
    return (": " + "; ".join(parts)) if parts else ""


def unknown_trust(meta: RunMeta) -> TraceTrust:
    """No verdict: the run holds no trace checks. Its reason says what is missing and why, so
    that no view reads the trace as checked."""
    if meta.exported_from:  # an mlaprof export's kernels are stored as they are, not checked
        why = (
            "no trace checks: this run was imported from an mlaprof export of run "
            f"{meta.exported_from!r} that did not carry them (exports before they were carried); "
            "re-export that run, or import its original trace"
        )
    elif meta.cpu_trace is not None:
        why = "no trace checks: a CPU-only profiler trace has no graph replays or GPU dispatches"
    else:
        why = (
            "no trace checks: the import recorded none (no MLA kernel recognised to check the "
            "replays of, or a run imported before mlaprof kept them)"
        )
    return TraceTrust(
        TraceTrustCounts(),
        reasons=[why],
        reliable=None,
        verdict="unknown",
        provenance=_origin(meta),
    )


def _eager_between_replays(cap: Capture) -> int:
    """Eager steps of the ranks that also replay graphs, each rank's own (a rank that ran
    every step eagerly has no replays for its steps to be between)."""
    if cap.per_rank:
        return sum(r.eager_steps or 0 for r in cap.per_rank if r.graph_steps)
    return (cap.eager_steps or 0) if cap.graph_steps else 0


def _gap_ranks(checks: RunChecks) -> str | None:
    """Where steps were told apart by idle gaps: ``""`` for every rank of a one-rank trace (or
    an older import's sum), ``" on ranks 0, 2 of 4"`` for some of a fleet's; None: nowhere.
    Each rank's own step checks decide, never one rank's for all."""
    own = checks.ranks()
    if not own:
        return "" if checks.group("steps").get("source") == SOURCE_GAPS else None
    gaps = [r for r, c in own.items() if c.group("steps").get("source") == SOURCE_GAPS]
    if not gaps:
        return None
    return f" on {ranks_of(gaps, len(own))}" if len(own) > 1 else ""


def _records(checks: RunChecks) -> dict[str, int]:
    """The dispatch records the import took apart (check ``records``), over the ranks of
    ``checks`` (one rank's checks: its own)."""
    out = {"dispatches": 0, "repeated_dispatches": 0, "nameless_dispatches": 0}
    for c in checks.by_rank.values():
        rec = c.group(RECORDS)
        for k in out:
            v = rec.get(k, 0)
            out[k] += v if isinstance(v, int) and not isinstance(v, bool) else 0
    return out


def rank_trusts(
    meta: RunMeta, steps: pd.DataFrame, checks: RunChecks | None = None
) -> dict[int, TraceTrust]:
    """Each rank's trust from that rank's evidence only: its own import checks and its own
    steps' capture evidence (the fleet's eager steps are not this rank's). One rank or an
    older import without per-rank checks: none (the run's verdict is that rank's); several
    ranks and no checks at all: each rank "unknown", saying why (:func:`unknown_trust`)."""
    checks = checks if checks is not None else RunChecks()
    own = checks.ranks()
    ranks = {r.rank for r in meta.rank_sources if r.rank is not None}
    ranks |= {int(r) for r in steps["rank"]} if "rank" in steps else set()
    if not checks and len(ranks) > 1:  # no rank's checks: each rank's verdict is unknown
        return {r: unknown_trust(meta) for r in sorted(ranks)}
    if len(own) < 2:
        return {}
    out = {}
    for r in own:
        mine = steps[steps["rank"] == r] if not steps.empty else steps
        alone = checks.only(r)
        out[r] = trust_summary(meta, step_mode_evidence(meta, mine, alone), alone)
    return out


def trust_by_rank(
    meta: RunMeta, steps: pd.DataFrame, checks: RunChecks | None = None
) -> dict[int, str]:
    """Each rank's trust verdict (:func:`rank_trusts`)."""
    return {r: t.verdict for r, t in rank_trusts(meta, steps, checks).items()}


def _short(c: dict[str, int]) -> list[str]:
    parts = [  # each count, its noun and what the count is of
        (c["short_replays"], f"{c['short_replays']} of {c['replays']} replays miss kernels"),
        *((n, f"{counted(n, unit)} {what}") for n, unit, what in (
            (c.get("steps_layers_unknown", 0), "step(s)", "missing a layer, which one unknown"),
            (c.get("eager_steps_missing_layers", 0), "eager step(s)", "short of layers"),
            (c["launches_without_kernels"], "launch(es)", "without kernels"),
            (c["split_layers_without_stage2"], "split layer(s)", "without stage 2"),
            (c.get("nameless_dispatches", 0), "dispatch(es)", "without their kernel symbol"),
        )),
    ]  # fmt: skip
    return [text for n, text in parts if n]


def fleet_trust(trust: TraceTrust, per_rank: dict[int, TraceTrust] | None) -> TraceTrust:
    """The whole trace's trust where its ranks have verdicts of their own: its reasons are the
    unreliable ranks' own, each naming its rank (a reliable rank's replays are never pooled
    into an unreliable rank's share); its counts stay the sums over ranks, said so."""
    bad = unreliable_ranks(per_rank)
    if not bad or per_rank is None:
        return trust
    reasons = [f"rank {r}: {why}" for r in bad for why in per_rank[r].reasons]
    return replace(trust, reasons=reasons)


def unreliable_ranks(per_rank: dict[int, TraceTrust] | None) -> list[int]:
    """The ranks whose own checks make them unreliable (empty: none, or no per-rank verdicts)."""
    return sorted(r for r, t in (per_rank or {}).items() if t.verdict == "unreliable")


def trust_findings(
    trust: TraceTrust | None, per_rank: dict[int, TraceTrust] | None = None
) -> list[Finding]:
    """The trace is unreliable: one finding per unreliable rank, from that rank's own checks
    (``per_rank``: :func:`rank_trusts`; a reliable rank's counts are never pooled with an
    unreliable one's, and the finding names its rank); the whole trace's where the run has no
    per-rank verdicts (one rank, an older import that kept only the sum)."""
    if trust is None or trust.verdict != "unreliable":
        return []
    bad = unreliable_ranks(per_rank)
    if not bad:
        return [_trust_finding(trust)]
    reliable = sorted(set(per_rank or {}) - set(bad))
    whose = "its" if len(reliable) == 1 else "their"
    also = f"; {rank_list(reliable)} reliable on {whose} own checks" if reliable else ""
    return [_trust_finding(per_rank[r], r, also) for r in bad]  # type: ignore[index]


def _trust_finding(trust: TraceTrust, rank: int | None = None, also: str = "") -> Finding:
    have = asdict(trust.counts)
    counts: dict[str, Any] = {k: have[k] for k in COUNTS if have[k] is not None}
    if rank is not None:  # one rank's own counts (fold_ranks names the rank in the title)
        counts["rank"] = rank
    return Finding(
        kind="trust",
        severity="warning",
        title="this trace is unreliable: " + ", ".join(_short(counts)),
        evidence="; ".join(trust.reasons) + f" ({trust.provenance}{also})",
        fix=(
            "re-trace with a rocprofv3 that keeps every replay dispatch (ROCm >= 7.2.2) and "
            "capture every batch size you serve; findings below are marked unreliable"
        ),
        data=counts,
    )


def mark_unreliable(
    findings: list[Finding],
    trust: TraceTrust | None,
    per_rank: dict[int, TraceTrust] | None = None,
) -> None:
    """Every finding drawn from an unreliable trace says so (the trust finding names why);
    ``trust`` None: the run holds no import checks to judge (nothing is marked). Where ranks
    have verdicts of their own (``per_rank``), a finding of a reliable rank is not marked; one
    that names no rank pools every rank's records, so it is."""
    if trust is None or trust.verdict != "unreliable":
        return
    bad = set(unreliable_ranks(per_rank))
    for f in findings:
        ranks = _ranks_of(f)
        f.unreliable = f.kind != "trust" and (not bad or not ranks or bool(ranks & bad))


def _ranks_of(f: Finding) -> set[int]:
    """The ranks a finding holds for, where its data names them (empty: it pools every rank)."""
    if isinstance(f.data.get("rank"), int):
        return {f.data["rank"]}
    ranks = f.data.get("ranks")
    if isinstance(ranks, list) and ranks and all(isinstance(r, int) for r in ranks):
        return set(ranks)
    return set()

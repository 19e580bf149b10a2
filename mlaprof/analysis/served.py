"""What a recorded engine served, measured from its own records (the vLLM plugin's per-step rows
and the EngineCore's acceptance counters): steps, verify rows, draft tokens per request,
acceptance, graph mode and padding per step, rows the backend filed as prefill."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import EngineSection, ShadowSection
from mlaprof.analysis.shadow import (
    SHADOW_AITER,
    SHADOW_DEVICE,
    shadow,
    shadow_findings,
    shadow_summary,
)
from mlaprof.analysis.share import share_text
from mlaprof.analysis.typed_json import over_ranks_label

if TYPE_CHECKING:
    from mlaprof.analysis.step_records import Acceptance, EngineStep


def served_summary(steps: list[EngineStep], acc: list[Acceptance]) -> EngineSection | None:
    """What the engine served, measured: ``steps`` the worker's per-step records (all ranks, in
    order), ``acc`` the scheduler's acceptance counters. None when the run holds no engine step."""
    if not steps:
        return None
    verify = [s for s in steps if s.kind == "verify"]
    first_rank = min(x.rank for x in steps)  # once: not again for every verify step
    rank0 = [s for s in verify if s.rank == first_rank]
    drafted = sum(s.verify_draft_tokens for s in rank0)
    accepted = sum(a.accepted_tokens for a in acc) if acc else None
    # the scheduler's steps and the worker's verify steps, in order, over the steps both
    # databases committed (mlaprof.analysis.consistency): same rows, same drafts
    joined = scheduler_agreement(rank0, acc)
    first = steps[0]
    ranks = sorted({s.rank for s in steps})
    source = "measured: recorded by the vLLM plugin"
    if len(ranks) > 1:  # two scopes in one section: each count says whose records it holds
        source += (
            f"; steps, kinds, graph modes and padded steps count all {len(ranks)} ranks' "
            f"records, the verify counts rank {first_rank}'s"
        )
    return EngineSection(
        source=source,
        backend=first.backend,
        builder=first.builder,
        heads=first.heads,
        spec_method=first.spec_method,
        num_speculative_tokens=first.num_speculative_tokens,
        max_num_seqs=first.max_num_seqs,
        steps=len(steps),
        kinds=dict(Counter(s.kind for s in steps)),
        graph_modes=dict(Counter(str(s.graph_mode) for s in steps)),
        verify_steps=len(rank0),
        verify_rows=sum(s.verify_rows for s in rank0),
        verify_rows_as_prefill=sum(s.verify_rows_as_prefill for s in rank0),
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if accepted is not None and drafted else None,
        scheduler_steps=len(acc),
        scheduler_matches_worker=joined.agree,
        scheduler_worker_compared=joined.compared,
        scheduler_worker_text=joined.text,
        drafter_builds=sum(s.drafter_builds for s in rank0),
        padded_steps=sum(1 for s in steps if (s.padded_tokens or 0) > s.num_tokens),
        ranks=ranks,
        verify_rank=first_rank,
    )


def served_findings(eng: EngineSection | None) -> list[Finding]:
    """What the engine did (information) and the verify rows its backend filed as prefill."""
    out: list[Finding] = []
    if eng:
        acc = (
            "acceptance not recorded (the EngineCore records it when log stats are on)"
            if eng.accepted_tokens is None
            else f"{eng.accepted_tokens} of {eng.draft_tokens} draft tokens accepted "
            f"({share_text(eng.acceptance_rate)})"
            if eng.draft_tokens
            else "no draft tokens yet"
        )
        modes = ", ".join(f"{m} x{n}" for m, n in eng.graph_modes.items())
        # the verify counts are one rank's, the step counts every rank's: each says whose
        several = len(eng.ranks) > 1 and eng.verify_rank is not None
        whose = f" (rank {eng.verify_rank}'s records)" if several else ""
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"engine (measured): {eng.verify_steps} verify steps, "
                    f"{eng.verify_rows} verify rows{whose}, {acc}"
                ),
                evidence=(
                    f"{eng.backend}, {eng.spec_method} k={eng.num_speculative_tokens}, "
                    f"{eng.steps} steps, graph {modes}{over_ranks_label('sum', eng.ranks)}; "
                    "scheduler and worker records " + str(eng.scheduler_worker_text)
                ),
                fix="nothing to fix: what the engine did",
                data={
                    k: getattr(eng, k) for k in ("verify_rows", "draft_tokens", "accepted_tokens")
                },
            )
        )
    if eng and eng.verify_rows_as_prefill:
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"{eng.verify_rows_as_prefill} of {eng.verify_rows} verify rows were "
                    f"filed as prefill by {eng.backend} (measured)"
                ),
                evidence=(
                    f"the {eng.builder} splits decodes at query length "
                    "reorder_batch_threshold; longer verify rows run its prefill path, not a "
                    "verify kernel"
                ),
                fix="expected on the CPU MLA backend; on a GPU use ROCM_AITER_MLA / TRITON_MLA",
            )
        )
    return out


def engine_findings(eng: EngineSection | None, sh: ShadowSection | None) -> list[Finding]:
    """The measured findings, then the modelled ones (:mod:`mlaprof.analysis.shadow`)."""
    return served_findings(eng) + shadow_findings(sh)


def served_analysis(
    steps: list[EngineStep],
    acc: list[Acceptance],
    device: str | None = None,
    aiter: str | None = None,
) -> tuple[EngineSection | None, ShadowSection | None, list[Finding]]:
    """(served summary, shadow summary, findings) of the engine records a run holds; (None,
    None, []) for a run with none (only an engine run's adapter fills them)."""
    if not steps:
        return None, None, []
    device, aiter = device or SHADOW_DEVICE, aiter or SHADOW_AITER
    eng = served_summary(steps, acc)
    sh = shadow_summary(shadow(steps, device, aiter), device, aiter)
    return eng, sh, engine_findings(eng, sh)

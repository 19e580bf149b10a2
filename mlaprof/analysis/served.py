"""What a recorded engine served, measured from its own records (the vLLM plugin's per-step rows
and the EngineCore's acceptance counters): steps, verify rows, draft tokens per request,
acceptance, graph mode and padding per step, rows the backend filed as prefill."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import EngineRankVerify, EngineSection, ShadowSection
from mlaprof.analysis.shadow import (
    SHADOW_AITER,
    SHADOW_DEVICE,
    shadow,
    shadow_findings,
    shadow_summary,
)
from mlaprof.analysis.share import share_text
from mlaprof.analysis.typed_json import over_ranks_label
from mlaprof.rank_counts import per_rank_count, rank_list

if TYPE_CHECKING:
    from mlaprof.analysis.step_records import Acceptance, EngineStep


def served_summary(steps: list[EngineStep], acc: list[Acceptance]) -> EngineSection | None:
    """What the engine served, measured: ``steps`` the worker's per-step records (all ranks, in
    order), ``acc`` the scheduler's acceptance counters. None when the run holds no engine step.
    The verify counts are each rank's (``per_rank``) and their sums; the scheduler's records
    pair with one worker's, the first rank's (``verify_rank``)."""
    if not steps:
        return None
    verify = [s for s in steps if s.kind == "verify"]
    ranks = sorted({s.rank for s in steps})
    per_rank = [_rank_verify(r, [s for s in verify if s.rank == r]) for r in ranks]
    first_rank = ranks[0]
    rank0 = [s for s in verify if s.rank == first_rank]
    drafted = per_rank[0].draft_tokens  # the drafts the scheduler's acceptance counts
    accepted = sum(a.accepted_tokens for a in acc) if acc else None
    # the scheduler's steps and the worker's verify steps, in order, over the steps both
    # databases committed (mlaprof.analysis.consistency): same rows, same drafts
    joined = scheduler_agreement(rank0, acc)
    first = steps[0]
    source = "measured: recorded by the vLLM plugin"
    if len(ranks) > 1:  # each count says whose records it holds
        source += (
            f"; steps, kinds, graph modes, padded steps and verify counts add all {len(ranks)} "
            f"ranks' records (each rank's verify counts: per rank), the acceptance rate is of "
            f"rank {first_rank}'s draft tokens"
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
        verify_steps=sum(r.verify_steps for r in per_rank),
        verify_rows=sum(r.verify_rows for r in per_rank),
        verify_rows_as_prefill=sum(r.verify_rows_as_prefill for r in per_rank),
        draft_tokens=sum(r.draft_tokens for r in per_rank),
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if accepted is not None and drafted else None,
        scheduler_steps=len(acc),
        scheduler_matches_worker=joined.agree,
        scheduler_worker_compared=joined.compared,
        scheduler_worker_text=joined.text,
        drafter_builds=sum(r.drafter_builds for r in per_rank),
        padded_steps=sum(1 for s in steps if (s.padded_tokens or 0) > s.num_tokens),
        ranks=ranks,
        per_rank=per_rank,
        verify_rank=first_rank,
    )


def _rank_verify(rank: int, verify: list[EngineStep]) -> EngineRankVerify:
    return EngineRankVerify(
        rank=rank,
        verify_steps=len(verify),
        verify_rows=sum(s.verify_rows for s in verify),
        verify_rows_as_prefill=sum(s.verify_rows_as_prefill for s in verify),
        draft_tokens=sum(s.verify_draft_tokens for s in verify),
        drafter_builds=sum(s.drafter_builds for s in verify),
    )


def per_rank_verify(eng: EngineSection, key: str, unit: str) -> str:
    """One verify count of ``eng`` in words, per rank (``"2 verify steps"`` for one rank;
    ``"2-3 verify steps per rank (ranks 0: 2, 1: 3)"``): never a sum that names no rank."""
    return per_rank_count({r.rank: getattr(r, key) for r in eng.per_rank}, unit)


def served_findings(eng: EngineSection | None) -> list[Finding]:
    """What the engine did (information) and the verify rows its backend filed as prefill."""
    out: list[Finding] = []
    if eng:
        # the scheduler's acceptance pairs with one rank's drafts (verify_rank's), never a sum
        drafted = next(
            (r.draft_tokens for r in eng.per_rank if r.rank == eng.verify_rank), eng.draft_tokens
        )
        whose = f"{rank_list([eng.verify_rank])}'s " if len(eng.per_rank) > 1 else ""
        acc = (
            "acceptance not recorded (the EngineCore records it when log stats are on)"
            if eng.accepted_tokens is None
            else f"{eng.accepted_tokens} of {whose}{drafted} draft tokens accepted "
            f"({share_text(eng.acceptance_rate)})"
            if drafted
            else "no draft tokens yet"
        )
        modes = ", ".join(f"{m} x{n}" for m, n in eng.graph_modes.items())
        # the verify counts per rank, the step counts every rank's (said a sum where several)
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"engine (measured): {per_rank_verify(eng, 'verify_steps', 'verify steps')}, "
                    f"{per_rank_verify(eng, 'verify_rows', 'verify rows')}, {acc}"
                ),
                evidence=(
                    f"{eng.backend}, {eng.spec_method} k={eng.num_speculative_tokens}, "
                    f"{eng.steps} steps, graph {modes}{over_ranks_label('sum', eng.ranks)}; "
                    "scheduler and worker records " + str(eng.scheduler_worker_text)
                ),
                fix="nothing to fix: what the engine did",
                data={
                    **{
                        k: getattr(eng, k)
                        for k in ("verify_rows", "draft_tokens", "accepted_tokens")
                    },
                    # each rank's verify rows (the sums above add them)
                    "verify_rows_per_rank": {r.rank: r.verify_rows for r in eng.per_rank},
                },
            )
        )
    if eng and eng.verify_rows_as_prefill:
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"{_of_per_rank(eng, 'verify_rows_as_prefill', 'verify_rows', 'verify rows')}"
                    f" were filed as prefill by {eng.backend} (measured)"
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


def _of_per_rank(eng: EngineSection, part: str, whole: str, unit: str) -> str:
    """``"3 of 8 verify rows"`` for one rank, or where every rank's are the same ("... per rank
    (2 ranks)"); each rank's otherwise ("rank 0: 3 of 8, rank 1: 1 of 6 verify rows")."""
    pairs = {r.rank: (getattr(r, part), getattr(r, whole)) for r in eng.per_rank}
    if len(set(pairs.values())) == 1:
        a, b = next(iter(pairs.values()))
        return f"{a} of {per_rank_count(dict.fromkeys(pairs, b), unit)}"
    each = ", ".join(f"{rank_list([r])}: {a} of {b}" for r, (a, b) in sorted(pairs.items()))
    return f"{each} {unit}"


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

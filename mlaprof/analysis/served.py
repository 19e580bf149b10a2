"""What a recorded engine served, measured from its own records (the vLLM plugin's per-step rows
and the EngineCore's acceptance counters): steps, verify rows, draft tokens per request,
acceptance, graph mode and padding per step, rows the backend filed as prefill."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.findings import Finding
from mlaprof.analysis.sections import (
    EngineAcceptance,
    EngineRankVerify,
    EngineSection,
    Pairing,
    ShadowSection,
)
from mlaprof.analysis.shadow import (
    SHADOW_AITER,
    SHADOW_DEVICE,
    shadow,
    shadow_findings,
    shadow_summary,
)
from mlaprof.analysis.share import share_text
from mlaprof.analysis.typed_json import over_ranks_how, over_ranks_label
from mlaprof.integrations.vllm_names import (
    FROM_DEFAULT,
    FROM_ENGINE,
    FROM_ENGINE_INDEX,
    FROM_TORCH,
    FROM_VLLM_WORLD,
)
from mlaprof.rank_counts import per_rank_count, rank_list

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mlaprof.analysis.step_records import Acceptance, EngineStep

# the rules that name a scheduler database after its engine's own first worker: the process's
# own distributed rank (its worker runs in it; numbered by its engine's DP index where vLLM runs
# the engine independently) or its engine's data-parallel layout (vllm_plugin.scheduler_rank);
# RANK / LOCAL_RANK / the default 0 say nothing of the engine
ENGINE_RULES = frozenset({FROM_TORCH, FROM_VLLM_WORLD, FROM_ENGINE, FROM_ENGINE_INDEX})


def pairing_of(rule: str | None, own: bool) -> Pairing | None:
    """Whether an EngineCore's records pair with its engine's worker rank: known where its
    database's rank came from one of :data:`ENGINE_RULES` and pairs with that same worker rank
    (``own``), assumed for any other rule or a pairing with another rank, None where the run
    recorded no rule (an older run: never read as known)."""
    if rule is None:
        return None
    return Pairing.KNOWN if own and rule in ENGINE_RULES else Pairing.ASSUMED


def why_assumed(rule: str | None) -> str:
    """Why a pairing is assumed, from the rule its scheduler database recorded."""
    if rule in ENGINE_RULES:  # an engine's own rank, paired with another rank's drafts
        return "no worker rank of this run has its scheduler database's rank"
    if rule == FROM_DEFAULT:
        return "its scheduler database's rank is the default 0: no rule named it"
    return f"its scheduler database's rank came from {rule}, not from its engine"


def served_summary(
    steps: list[EngineStep], acc: list[Acceptance], rules: Mapping[int, str] | None = None
) -> EngineSection | None:
    """What the engine served, measured: ``steps`` the worker's per-step records (all ranks, in
    order), ``acc`` the scheduler's acceptance counters (each EngineCore's), ``rules`` the rule
    each EngineCore's database recorded naming its rank (by rank; none: not recorded). None
    when the run holds no engine step. The verify counts are each rank's (``per_rank``) and
    their sums.

    Each EngineCore's records pair with the worker rank of the same global rank: the plugin
    names its database after the global rank of its engine's first worker
    (``vllm_plugin.scheduler_rank``: its own distributed rank, else ``data_parallel_rank *
    world_size`` of its engine's config, the offset vLLM gives that engine's workers, or
    ``data_parallel_index * world_size`` for an independent engine, whose workers the plugin
    numbers so; its ``rank_source`` meta says which), so rank N's scheduler is the engine of
    worker rank N.
    One EngineCore pairs with its own rank, else the first rank's (``verify_rank``); several
    are each their engine's (``per_engine``), never one sum against one rank's drafts. Whether
    a pairing is known or assumed is :func:`pairing_of`'s, said in the source where assumed."""
    if not steps:
        return None
    rules = rules or {}
    verify = [s for s in steps if s.kind == "verify"]
    ranks = sorted({s.rank for s in steps})
    per_rank = [_rank_verify(r, [s for s in verify if s.rank == r]) for r in ranks]
    drafts = {r.rank: r.draft_tokens for r in per_rank}
    cores = sorted({a.rank for a in acc})
    first_rank = ranks[0]
    source = "measured: recorded by the vLLM plugin"
    if len(ranks) > 1:  # each count says whose records it holds
        source += (
            f"; steps, kinds, graph modes, padded steps and verify counts add all {len(ranks)} "
            f"ranks' records (each rank's verify counts: per rank)"
        )
    engines: list[EngineAcceptance] | None = None
    if len(cores) > 1:  # several EngineCores (data parallelism): each its own engine's
        engines = [
            _engine_acceptance(c, [a for a in acc if a.rank == c], verify, drafts, rules.get(c))
            for c in cores
        ]
        paired = [e for e in engines if e.paired_rank is not None]
        accepted = sum(e.accepted_tokens for e in engines)
        drafted = sum(e.draft_tokens or 0 for e in paired)
        rate = sum(e.accepted_tokens for e in paired) / drafted if drafted else None
        joined = [e.scheduler_matches_worker for e in engines]
        agree = False if False in joined else True if True in joined else None
        compared = sum(e.scheduler_worker_compared for e in engines)
        text = "; ".join(f"{_engine_name(e)}: {e.scheduler_worker_text}" for e in engines)
        verify_rank = None
        source += (
            f"; acceptance per engine: each EngineCore's records ({_scheduler_dbs(cores)}) "
            "against the drafts of the worker rank of the same global rank, its engine's"
        )
        if paired:
            source += (
                f"; the acceptance rate pools the tokens of the engines of "
                f"{rank_list([e.rank for e in paired])}"
            )
        unpaired = [e.rank for e in engines if e.paired_rank is None]
        if unpaired:
            source += (
                f"; the scheduler records of {rank_list(unpaired)} match no worker rank of "
                "this run: not attributed to an engine, so no rate of theirs and none in the "
                "pooled rate"
            )
        for e in (e for e in engines if e.pairing is Pairing.ASSUMED):
            source += f"; the {_engine_name(e)}: pairing assumed ({why_assumed(e.rank_source)})"
        pairing = rule = None  # each engine's own (per_engine)
        unrecorded: frozenset[str] = frozenset()
    else:  # one EngineCore (or none): its records against one rank's, its own where recorded
        verify_rank = cores[0] if cores and cores[0] in drafts else first_rank
        one = scheduler_agreement([s for s in verify if s.rank == verify_rank], acc)
        drafted = drafts[verify_rank]  # the drafts the scheduler's acceptance counts
        accepted = sum(a.accepted_tokens for a in acc) if acc else None
        rate = accepted / drafted if accepted is not None and drafted else None
        agree, compared, text = one.agree, one.compared, one.text
        if len(ranks) > 1:
            source += f", the acceptance rate is of {rank_list([verify_rank])}'s draft tokens"
        rule = rules.get(cores[0]) if cores else None
        pairing = pairing_of(rule, verify_rank == cores[0]) if cores else None
        # one EngineCore that recorded no rule: its pairing written null ("not recorded")
        unrecorded = frozenset({"pairing", "rank_source"} if cores and rule is None else ())
        if pairing is Pairing.ASSUMED:
            source += (
                f"; the pairing of the scheduler's records with {rank_list([verify_rank])}'s is "
                f"assumed ({why_assumed(rule)})"
            )
    first = steps[0]
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
        acceptance_rate=rate,
        scheduler_steps=len(acc),
        scheduler_matches_worker=agree,
        scheduler_worker_compared=compared,
        scheduler_worker_text=text,
        drafter_builds=sum(r.drafter_builds for r in per_rank),
        padded_steps=sum(1 for s in steps if (s.padded_tokens or 0) > s.num_tokens),
        ranks=ranks,
        per_rank=per_rank,
        verify_rank=verify_rank,
        per_engine=engines,
        pairing=pairing,
        rank_source=rule,
        null_keys=unrecorded,
    )


def _engine_acceptance(
    rank: int,
    acc: list[Acceptance],
    verify: list[EngineStep],
    drafts: dict[int, int],
    rule: str | None,
) -> EngineAcceptance:
    """EngineCore ``rank``'s records against the worker rank of the same global rank (its
    engine's); no pairing where the run holds no such worker rank. ``rule``: the rule its
    database recorded naming its rank (None: not recorded)."""
    accepted = sum(a.accepted_tokens for a in acc)
    if rank not in drafts:
        return EngineAcceptance(
            rank=rank, paired_rank=None, scheduler_steps=len(acc), accepted_tokens=accepted,
            draft_tokens=None, acceptance_rate=None, scheduler_matches_worker=None,
            scheduler_worker_compared=0,
            scheduler_worker_text=f"not attributed: no worker {rank_list([rank])}",
            pairing=Pairing.UNPAIRED, rank_source=rule,
        )  # fmt: skip
    joined = scheduler_agreement([s for s in verify if s.rank == rank], acc)
    drafted = drafts[rank]
    return EngineAcceptance(
        rank=rank,
        paired_rank=rank,
        scheduler_steps=len(acc),
        accepted_tokens=accepted,
        draft_tokens=drafted,
        acceptance_rate=accepted / drafted if drafted else None,
        scheduler_matches_worker=joined.agree,
        scheduler_worker_compared=joined.compared,
        scheduler_worker_text=joined.text,
        pairing=pairing_of(rule, own=True),
        rank_source=rule,
    )


def _engine_name(e: EngineAcceptance) -> str:
    """How every text names one EngineCore's engine: by its global rank ("engine of rank 1")."""
    return f"engine of {rank_list([e.rank])}"


def _scheduler_dbs(cores: list[int]) -> str:
    return ", ".join(f"rank{c}.scheduler.db" for c in cores)


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
        acc, pooled = _acceptance_text(eng)
        per_engine = {e.rank: e.accepted_tokens for e in eng.per_engine or []}
        modes = ", ".join(f"{m} x{n}" for m, n in eng.graph_modes.items())
        # the verify counts per rank, the step counts every rank's (said a sum where several)
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"engine (measured): {per_rank_verify(eng, 'verify_steps', 'verify step(s)')}, "
                    f"{per_rank_verify(eng, 'verify_rows', 'verify row(s)')}, {acc}"
                ),
                evidence=(
                    f"{eng.backend}, {eng.spec_method} k={eng.num_speculative_tokens}, "
                    f"{eng.steps} steps, graph {modes}{over_ranks_label('sum', eng.ranks)}; "
                    f"{pooled}scheduler and worker records " + str(eng.scheduler_worker_text)
                ),
                fix="nothing to fix: what the engine did",
                data={
                    **{
                        k: getattr(eng, k)
                        for k in ("verify_rows", "draft_tokens", "accepted_tokens")
                    },
                    # each rank's verify rows (the sums above add them)
                    "verify_rows_per_rank": {r.rank: r.verify_rows for r in eng.per_rank},
                    # each EngineCore's accepted tokens, where several (the sum above adds them)
                    **({"accepted_tokens_per_engine": per_engine} if per_engine else {}),
                },
            )
        )
    if eng and eng.verify_rows_as_prefill:
        out.append(
            Finding(
                kind="engine",
                severity="info",
                title=(
                    f"{_of_per_rank(eng, 'verify_rows_as_prefill', 'verify_rows', 'verify row(s)')}"
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


NO_ACCEPTANCE = "acceptance not recorded (the EngineCore records it when log stats are on)"


def _acceptance_text(eng: EngineSection) -> tuple[str, str]:
    """(the acceptance as the engine finding's title says it, the pooled rate its evidence says
    first, "" where none). One EngineCore: its accepted of its paired rank's drafts
    (``verify_rank``'s, named where several ranks hold drafts). Several: each engine's accepted
    of its own drafts, named by its rank; their pooled rate labelled as such, never a bare
    sum over engines against one rank's drafts."""
    if eng.per_engine:
        each = "; ".join(
            f"{_engine_name(e)}: " + (
                f"{e.accepted_tokens} of {e.draft_tokens} draft tokens accepted "
                f"({share_text(e.acceptance_rate)})"
                if e.draft_tokens
                else "no draft tokens yet"
                if e.paired_rank is not None
                else f"{e.accepted_tokens} draft tokens accepted, not attributed to an engine "
                "(no worker of its rank)"
            ) + _assumed(e.pairing, e.rank_source)
            for e in eng.per_engine
        )  # fmt: skip
        paired = [e for e in eng.per_engine if e.acceptance_rate is not None]
        how = over_ranks_how(EngineSection, "acceptance_rate")
        pooled = (
            f"acceptance of the engines of {rank_list([e.rank for e in paired])}: "
            f"{sum(e.accepted_tokens for e in paired)} of "
            f"{sum(e.draft_tokens or 0 for e in paired)} draft tokens, "
            f"{share_text(eng.acceptance_rate)}{over_ranks_label(how, len(paired))}; "
            if len(paired) > 1
            else ""
        )
        return f"acceptance per engine: {each}", pooled
    # one EngineCore: its acceptance pairs with one rank's drafts (verify_rank's), never a sum
    drafted = next(
        (r.draft_tokens for r in eng.per_rank if r.rank == eng.verify_rank), eng.draft_tokens
    )
    whose = f"{rank_list([eng.verify_rank])}'s " if len(eng.per_rank) > 1 else ""
    if eng.accepted_tokens is None:
        return NO_ACCEPTANCE, ""
    assumed = _assumed(eng.pairing, eng.rank_source)
    if not drafted:
        return "no draft tokens yet" + assumed, ""
    return (
        f"{eng.accepted_tokens} of {whose}{drafted} draft tokens accepted "
        f"({share_text(eng.acceptance_rate)}){assumed}",
        "",
    )


def _assumed(pairing: Pairing | None, rule: str | None) -> str:
    """What an acceptance's text adds where its pairing with a worker rank is assumed."""
    return f", pairing assumed ({why_assumed(rule)})" if pairing is Pairing.ASSUMED else ""


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
    rules: Mapping[int, str] | None = None,
) -> tuple[EngineSection | None, ShadowSection | None, list[Finding]]:
    """(served summary, shadow summary, findings) of the engine records a run holds; (None,
    None, []) for a run with none (only an engine run's adapter fills them). ``rules``: each
    EngineCore's rank rule (:func:`served_summary`)."""
    if not steps:
        return None, None, []
    device, aiter = device or SHADOW_DEVICE, aiter or SHADOW_AITER
    eng = served_summary(steps, acc, rules)
    sh = shadow_summary(shadow(steps, device, aiter), device, aiter)
    return eng, sh, engine_findings(eng, sh)

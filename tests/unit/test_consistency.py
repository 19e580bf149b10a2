"""Scheduler against worker (mlaprof.analysis.consistency): the EngineCore's acceptance records
match the worker's verify steps of one rank in order, rows and drafts alike; a scheduler that
recorded nothing is "not both present", never agreement; a side that has committed fewer steps
is pending, not a disagreement."""

from __future__ import annotations

from mlaprof.analysis.consistency import scheduler_agreement
from mlaprof.analysis.served import served_summary
from mlaprof.analysis.step_records import Acceptance, EngineStep


def _step(rows: int, drafts: int) -> EngineStep:
    return EngineStep.of({"rank": 0, "step": 0, "kind": "verify", "backend": "B", "builder": "b",
                          "heads": 16, "graph_mode": "FULL", "num_tokens": 16,
                          "padded_tokens": 16, "verify_rows": rows, "verify_draft_tokens": drafts,
                          "verify_rows_as_prefill": 0, "drafter_builds": 0})  # fmt: skip


def _worker(*rows_drafts: tuple[int, int]) -> list[EngineStep]:
    return [_step(r, d) for r, d in rows_drafts]


def _scheduler(*rows_drafts: tuple[int, int]) -> list[Acceptance]:
    return [Acceptance(rank=0, verify_rows=r, draft_tokens=d, accepted_tokens=0)
            for r, d in rows_drafts]  # fmt: skip


def test_same_steps_in_order_agree() -> None:
    a = scheduler_agreement(_worker((4, 12), (2, 6)), _scheduler((4, 12), (2, 6)))
    assert (a.agree, a.compared, a.worker_ahead, a.scheduler_ahead) == (True, 2, 0, 0)


def test_a_step_that_differs_disagrees_at_its_place() -> None:
    a = scheduler_agreement(_worker((4, 12), (2, 6)), _scheduler((4, 12), (2, 5)))
    assert (a.agree, a.first_mismatch) == (False, 1)
    a = scheduler_agreement(_worker((4, 12), (2, 6)), _scheduler((2, 6), (4, 12)))
    assert (a.agree, a.first_mismatch) == (False, 0)


def test_a_step_not_yet_committed_is_pending() -> None:
    a = scheduler_agreement(_worker((4, 12), (2, 6)), _scheduler((4, 12)))
    assert (a.agree, a.compared, a.worker_ahead) == (True, 1, 1)
    assert a.text == "agree on 1 step both committed; 1 worker step not yet matched"


def test_no_scheduler_record_is_not_both_present() -> None:
    assert scheduler_agreement(_worker((4, 12)), []).agree is None


def test_the_served_summary_says_what_the_rule_says() -> None:
    step = _step(4, 12)
    eng = served_summary([step], _scheduler((4, 11)))
    assert eng is not None and eng.scheduler_matches_worker is False
    none = served_summary([step], [])
    assert none is not None and none.scheduler_matches_worker is None

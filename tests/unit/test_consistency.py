"""Scheduler against worker (mlaprof.analysis.consistency): the EngineCore's acceptance records
match the worker's verify steps of one rank in order, rows and drafts alike; a scheduler that
recorded nothing is "not both present", never agreement."""

from __future__ import annotations

from mlaprof.analysis.consistency import scheduler_matches_worker
from mlaprof.analysis.served import served_summary


def _worker(*rows_drafts: tuple[int, int]) -> list[dict]:
    return [{"verify_rows": r, "verify_draft_tokens": d} for r, d in rows_drafts]


def _scheduler(*rows_drafts: tuple[int, int]) -> list[dict]:
    return [{"verify_rows": r, "draft_tokens": d, "accepted_tokens": 0} for r, d in rows_drafts]


def test_same_steps_in_order_agree() -> None:
    assert scheduler_matches_worker(_worker((4, 12), (2, 6)), _scheduler((4, 12), (2, 6))) is True


def test_a_step_that_differs_or_is_missing_disagrees() -> None:
    assert scheduler_matches_worker(_worker((4, 12), (2, 6)), _scheduler((4, 12), (2, 5))) is False
    assert scheduler_matches_worker(_worker((4, 12), (2, 6)), _scheduler((4, 12))) is False
    assert scheduler_matches_worker(_worker((4, 12), (2, 6)), _scheduler((2, 6), (4, 12))) is False


def test_no_scheduler_record_is_not_both_present() -> None:
    assert scheduler_matches_worker(_worker((4, 12)), []) is None


def test_the_served_summary_says_what_the_rule_says() -> None:
    step = {"kind": "verify", "rank": 0, "backend": "B", "builder": "b", "heads": 16,
            "graph_mode": "FULL", "verify_rows": 4, "verify_draft_tokens": 12,
            "verify_rows_as_prefill": 0, "drafter_builds": 0, "padded_tokens": 16,
            "num_tokens": 16}  # fmt: skip
    eng = served_summary([step], _scheduler((4, 11)))
    assert eng is not None and eng["scheduler_matches_worker"] is False
    assert served_summary([step], [])["scheduler_matches_worker"] is None

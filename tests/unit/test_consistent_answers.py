"""Answers that contradict each other or the evidence: each rule lives once in
``mlaprof.analysis`` and every view prints what it returns."""

from __future__ import annotations

from mlaprof.analysis.engine import engine_findings
from mlaprof.analysis.share import share_text
from tui.fmt import fmt_pct


def test_a_share_short_of_an_end_never_prints_as_that_end() -> None:
    assert share_text(0.9983) == "99.8%"
    assert share_text(0.002) == "0.2%"
    assert share_text(0.99996) == "99.996%"
    assert share_text(1.0) == "100%" and share_text(0.0) == "0%"
    assert share_text(0.5) == "50%" and share_text(0.123, 1) == "12.3%"
    assert share_text(None) == "-" and share_text(float("nan")) == "-"
    assert share_text(1 - 1e-9) == ">99.999%" and share_text(1e-9) == "<0.001%"
    assert fmt_pct(0.9983) == "99.8%"  # the TUI prints the same


def test_acceptance_of_99_83_percent_is_not_printed_as_100() -> None:
    eng = {
        "accepted_tokens": 5990,
        "draft_tokens": 6000,
        "acceptance_rate": 5990 / 6000,
        "graph_modes": {"FULL": 3},
        "steps": 3,
        "kinds": {"verify": 3},
        "verify_steps": 3,
        "verify_rows": 12,
        "verify_rows_as_prefill": 0,
        "scheduler_steps": 3,
        "scheduler_matches_worker": True,
        "drafter_builds": 0,
        "padded_steps": 0,
        "ranks": [0],
        "backend": "TRITON_MLA",
        "builder": "x",
        "heads": 16,
        "spec_method": "mtp",
        "num_speculative_tokens": 3,
    }
    text = " ".join(f.title + " " + f.evidence for f in engine_findings(eng, None))
    assert "(99.8%)" in text and "100%" not in text

"""Ranks are never summed silently: every count in ``runs``, the picker, the headline, the
padding and sync lines is per rank, a range over ranks, or says it sums ranks (``run --ranks 2
--steps 3`` read as 6 steps and "18 real + 6 padding rows over 6 steps")."""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.padding import padding_findings, padding_summary
from mlaprof.analysis.run_state import run_state
from mlaprof.analysis.syncs import sync_counts
from mlaprof.rank_counts import per_rank_count
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def test_a_count_over_ranks_is_per_rank_or_a_range() -> None:
    assert per_rank_count({0: 3}, "steps") == "3 steps"
    assert per_rank_count({0: 3, 1: 3}, "steps") == "3 steps per rank (2 ranks)"
    assert per_rank_count({0: 3, 1: 4}) == "3-4 per rank (ranks 0: 3, 1: 4)"


def test_the_run_listing_counts_steps_per_rank() -> None:
    """The 8-rank fleet import: 3 steps per rank, not 24 (runs and the TUI picker)."""
    from mlaprof.store.reader import run_info

    info = run_info(shipped_runs.run_dir("aiter-fleet_dp2_tp4"))
    assert info.rank_steps == dict.fromkeys(range(8), 3)
    # an import no report has counted yet lists its committed rows, said as such
    assert info.steps_text().startswith("3 per rank (8 ranks)")
    assert info.steps_text("steps").startswith("3 steps per rank (8 ranks)")
    one = run_info(shipped_runs.run_dir("demo-fix-padding-active-rows-c16"))
    assert one.steps_text() == "32" and one.steps_text("steps") == "32 steps"


def _padding(ranks: dict[int, int]) -> pd.DataFrame:
    rows = []
    for rank, steps in ranks.items():
        for step in range(steps):
            rows.append({"rank": rank, "step": step, "real_rows": 3, "padding_rows": 1,
                         "real_tokens": 12, "padding_tokens": 4, "capture_size": 16,
                         "kv_bytes_padding": 0})  # fmt: skip
    return pd.DataFrame(rows)


def test_padding_is_said_per_rank_or_as_a_sum_over_ranks() -> None:
    two = padding_summary(_padding({0: 3, 1: 3}))
    assert two.ranks == 2 and [r.steps for r in two.per_rank or []] == [3, 3]
    assert two.text.startswith("9 real + 3 padding rows over 3 steps per rank (2 ranks)")
    (f,) = padding_findings(_padding({0: 3, 1: 3}))
    assert "3 padding rows to 9 real requests over 3 steps per rank" in f.title
    uneven = padding_summary(_padding({0: 3, 1: 4}))
    assert "21 real + 7 padding rows (sum over 2 ranks) over 3-4 steps per rank" in uneven.text
    one = padding_summary(_padding({0: 3}))
    assert one.text.startswith("9 real + 3 padding rows over 3 steps (")


def test_the_run_state_and_sync_line_count_per_rank() -> None:
    steps = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1], "step": [0, 1, 2, 0, 1, 2]})
    st = run_state("incomplete", None, steps)
    assert (st.steps_committed, st.last_step) == (3, 2)
    assert "3 steps per rank (2 ranks) committed" in st.text
    layers = pd.DataFrame({"rank": [0, 1], "step": [0, 0], "layer": [0, 0], "syncs": [0, 0]})
    n = sync_counts(pd.DataFrame(), layers)
    assert n.text == "0 per rank (2 ranks), 1 step per rank (2 ranks) checked"


def test_padding_without_token_counts_has_no_share() -> None:
    """Rows recorded, token counts not: the padding share is unknown, never a 0% that reads as
    measured (the rows are still counted)."""
    rows = _padding({0: 3}).assign(real_tokens=pd.NA, padding_tokens=pd.NA)
    s = padding_summary(rows)
    assert s.padding_rows == 3 and s.padding_fraction is None
    (f,) = padding_findings(rows)
    assert "0.0%" not in f.evidence and "an unrecorded share of verify tokens" in f.evidence
    assert padding_summary(_padding({0: 3})).padding_fraction == 0.25


def test_every_view_says_which_ranks_by_one_rule() -> None:
    """Which ranks a statement holds for was written three ways ("ranks 0, 1" in a vLLM log's
    findings, "2 (ranks 0, 1)" in the Markdown and HTML reports, "ranks 0-1" in the terminal
    and the TUI): now one span rule under all of them."""
    from mlaprof.rank_counts import rank_list, rank_span, ranks_count
    from mlaprof.reporters.fmt import field_text

    assert [rank_span(r) for r in ([3], [1, 0], [0, 2, 5], [7, 5, 6])] == [
        "3",
        "0-1",
        "0, 2, 5",
        "5-7",
    ]
    assert rank_span([0, 1, 2, 5, 7, 8, 8]) == "0-2, 5, 7-8"  # runs and singles, once each
    # a fleet's scattered ranks stay one line: the first 16 items, then how many there are
    evens = range(0, 64, 2)
    assert rank_span(evens) == ", ".join(map(str, range(0, 32, 2))) + ", ... (32 ranks)"
    assert rank_list([2, 0, 1, 1]) == "ranks 0-2" and rank_list([4]) == "rank 4"
    assert ranks_count([1, 0]) == "2 (ranks 0-1)" and ranks_count([0]) == "1 (rank 0)"
    for rs in ([0, 1], [0, 2, 5], [3], list(range(8))):
        assert field_text("ranks", rs) == ranks_count(rs) == f"{len(rs)} ({rank_list(rs)})"

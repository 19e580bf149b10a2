"""The typed sections that say what the dict summary left to the views: a fleet per DP group
(ranges, never one merged value), the S a FULL graph replays beside the S modelled (measured
over modelled), syncs "checked: 0" apart from "not checked", and where the run stands."""

from __future__ import annotations

from dataclasses import replace

from mlaprof.analysis.sections import RunStatus, Source
from tests import shipped_runs

# the shipped runs' summaries, built once per worker (tests/shipped_runs.py; the tests only read
# them), shared with the figure, golden-document and renderer tests
WORKER_GROUP = "shipped-runs"
_summary = shipped_runs.summary


def test_a_fleet_is_told_per_dp_group_with_the_s_each_group_ran() -> None:
    """fleet_dp2_tp4: DP group 0 (ranks 0-3) collapsed to S 1, group 1 (ranks 4-7) runs S 8;
    no row says one S for all eight ranks."""
    s = _summary("aiter-fleet_dp2_tp4")
    rows = [(g.dp_group, g.ranks, g.S_min, g.S_max) for g in s.dp_groups]
    assert rows == [(0, [0, 1, 2, 3], 1, 1), (1, [4, 5, 6, 7], 8, 8)]
    by_rank = {r.rank: r.S_min for r in s.fleet.per_rank}
    for g in s.dp_groups:
        assert {by_rank[r] for r in g.ranks} == {g.S_min}


def test_the_s_a_full_graph_replays_is_measured_over_modelled() -> None:
    """A GPU run whose graph replayed S = 4: the measured S is the one shown, and the dummy
    run's modelled S = 1 no longer stands beside it (as in the splits table); a run with no
    replay shows the modelled S."""
    fix = _summary("demo-fix-padding-active-rows-c16").full_graph_splits
    assert (fix.measured_min, fix.measured_max, fix.modelled) == (4, 4, None)
    assert fix.source is Source.MEASURED
    # a run whose capture failed runs PIECEWISE: no FULL graph, so no S frozen into one
    bug = _summary("demo-bug-legacy-flat-syncs-break-capture").full_graph_splits
    # nor the policy's S used under the captured graph's title: the section is absent
    assert (bug.measured_min, bug.modelled, bug.used) == (None, None, None)
    assert bug.source is None
    captured = _summary("demo-bug-padding-collapses-splits-c16").full_graph_splits
    assert (captured.measured_max, captured.modelled) == (1, None)


def test_a_captured_graph_without_measured_replays_shows_the_modelled_frozen_s(tmp_path) -> None:
    """A CPU run whose FULL capture succeeded replays nothing measured: the dummy run's modelled
    S stands (the splits table's rule keeps it where the capture succeeded)."""
    import mlaprof
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.synthetic.figures import write_run

    with mlaprof.load(write_run(tmp_path, "fix", fixed=True, fallback_steps=())) as run:
        s = build_summary(run, series=False)
    assert str(s.capture.status) == "captured" and s.replayed_splits is None
    assert (s.full_graph_splits.modelled, s.full_graph_splits.source) == (1, Source.MODELLED)


def test_checked_zero_is_not_not_checked() -> None:
    s = _summary("demo-bug-legacy-flat-syncs-break-capture")
    assert s.sync_counts.checked and s.sync_counts.count == 32
    none_seen = replace(s.sync_counts, total=0)
    assert none_seen.count == 0
    assert replace(none_seen, checked=False).count is None


def test_a_finished_run_says_nothing_partial_and_its_status_is_the_enum() -> None:
    s = _summary("demo-fix-padding-active-rows-c16")
    assert s.status is RunStatus.FINISHED and s.state.status is RunStatus.FINISHED
    assert s.state.closed and s.state.text == "finished; 32 steps committed, last committed step 31"
    assert s.state.steps_committed > 0 and s.state.last_step is not None

"""The sync count's sums say they are over ranks, and count alike for every producer: a
scenario run's watched steps are its (rank, step) pairs as an import's are (two ranks watching
step 0 are two watched steps, each rank's 1 in ``per_rank``), and every section view labels
the sums "over ranks"."""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.syncs import sync_counts
from mlaprof.reporters.rows import summary_blocks
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"


def test_watched_steps_are_rank_step_pairs_for_a_scenario_run_as_for_an_import() -> None:
    layers = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [0, 0, 0, 0], "layer": [0, 1, 0, 1],
                           "syncs": [1, 0, 1, 0]})  # fmt: skip
    syncs = pd.DataFrame({"rank": [0, 1], "step": [0, 0], "layer": [0, 0], "kind": ["sync"] * 2})
    c = sync_counts(syncs, layers)
    assert c.watched_steps == 2 == sum(r.watched_steps for r in c.per_rank)
    assert c.total == 2 == sum(r.total for r in c.per_rank)
    fleet = shipped_runs.summary("aiter-fleet_dp2_tp4").sync_counts
    if fleet.checked:
        assert fleet.watched_steps == sum(r.watched_steps for r in fleet.per_rank)


def test_the_sections_say_the_sums_are_over_ranks() -> None:
    s = shipped_runs.summary("demo-bug-legacy-flat-syncs-break-capture")
    rows = {r.label for b in summary_blocks(s) if b.key == "sync_counts" for r in b.rows}
    assert {"total over ranks", "watched steps over ranks"} <= rows, rows


def test_ranks_whose_path_checks_agree_are_one_row_that_names_them() -> None:
    """Two ranks' path checks of one backend read the same: one row, ranks 0-1 (was one row
    per rank with no rank to tell them apart); a rank whose check differs keeps its own row."""
    import json

    from mlaprof.analysis.paths import path_checks

    torch = json.dumps({"backend": "torch", "syncs_per_layer": 0, "ops": [], "allocs_per_layer": 0})
    flat = json.dumps({"backend": "legacy-flat", "syncs_per_layer": 4, "ops": [],
                       "allocs_per_layer": 4})  # fmt: skip
    flat2 = flat.replace('"syncs_per_layer": 4', '"syncs_per_layer": 5')
    events = pd.DataFrame({"kind": ["path-check"] * 5, "rank": [0, 0, 1, 1, 2],
                           "data": [torch, flat, torch, flat, flat2]})  # fmt: skip
    got = {(c.backend, c.syncs_per_layer): c.ranks for c in path_checks(events)}
    assert got == {("torch", 0): [0, 1], ("legacy-flat", 4): [0, 1], ("legacy-flat", 5): [2]}


def test_a_fleets_path_rows_name_the_ranks_they_pool() -> None:
    """A trace's path row pools its ranks' steps (S 1-8, rows 6-15 over 8 ranks): every section
    view names those ranks in the row, as its JSON does."""
    s = shipped_runs.summary("aiter-fleet_dp2_tp4")
    assert s.trace is not None and s.trace.paths
    (block,) = [b for b in summary_blocks(s) if b.key == "trace"]
    (table,) = [t for t in block.tables if t.head[:2] == ["ranks", "path"]]
    assert [r[0] for r in table.rows] == ["8 (ranks 0-7)"] * len(s.trace.paths), table.rows
    assert all(p.ranks == list(range(8)) for p in s.trace.paths)

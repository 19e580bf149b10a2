"""A layer whose S is recorded on some steps only (the persistent kernel decides S on the
device on the others) says on how many: ``S_steps`` in the layer row, "steps with S" in the
Markdown/HTML/terminal sections, "(2 of 5 steps)" in the dashboard's S cell; the headline's
"S decided on the device ... S 6 on aiter-asm" and ``layer_splits`` (8 records with S 6, 12
without) read the same, never S 6 over all five steps."""

from __future__ import annotations

import dataclasses

from mlaprof.tui.once import read_view
from mlaprof.tui.text import layer_table
from tests import shipped_runs
from tests.unit.test_add_a_section import _views

WORKER_GROUP = "shipped-runs"
NAME = "aiter-persistent_switch"


def test_a_layers_s_says_the_steps_it_is_known_on_in_every_view() -> None:
    s = shipped_runs.summary(NAME)
    assert {(r.S_used, r.S_steps, r.steps) for r in s.layers} == {(6, 2, 5)}
    with_s = sum(c.records for c in s.layer_splits if c.splits is not None)
    assert sum(r.S_steps for r in s.layers) == with_s == 8
    view, _ = read_view(shipped_runs.run_dir(NAME))
    head, rows = layer_table(dataclasses.replace(view, summary=s))
    col = next(i for i, h in enumerate(head) if h.startswith("S"))
    assert {r[col] for r in rows} == {"6 (2 of 5 steps)"}, rows
    for name, text in _views(s, NAME).items():
        if name != "json":
            assert "steps with S" in text, name


def test_a_layer_with_s_on_every_step_reads_as_before() -> None:
    s = shipped_runs.summary("demo-fix-native-kernel-full-graph")
    assert s.layers and all(r.S_steps == r.steps for r in s.layers)
    view, _ = read_view(shipped_runs.run_dir("demo-fix-native-kernel-full-graph"))
    head, rows = layer_table(dataclasses.replace(view, summary=s))
    assert not any(" of " in c for r in rows for c in r)


def test_the_layer_table_says_which_steps_its_records_cover() -> None:
    """A GPU run times layers on a sample of its steps: the dashboard's layer table says "2 of
    32 steps with layer records", not "all steps", beside a headline over all 32."""
    view, _ = read_view(shipped_runs.run_dir("demo-fix-native-kernel-full-graph"))
    assert view.layer_scope == "2 of 32 steps with layer records"
    assert {r.steps for r in view.layers} == {2}
    every, _ = read_view(shipped_runs.run_dir("demo-bug-legacy-flat-syncs-break-capture"))
    assert every.layer_scope == "all steps"


def test_the_dashboards_step_times_are_the_summarys_served_steps() -> None:
    """The dashboard's recent step times leave the profiled steps out as the summary's median
    step does: its p50 over a run of fewer steps than its window is that median."""
    name = "demo-bug-legacy-flat-syncs-break-capture"
    s = shipped_runs.summary(name)
    view, _ = read_view(shipped_runs.run_dir(name))
    assert len(view.latency_ms) == s.timing.steps < 32
    p50 = dict(view.latency)["p50"]
    assert round(p50, 3) == round(s.timing.step_median_us / 1e3, 3)


def test_a_step_number_held_twice_on_one_rank_is_one_clear_error() -> None:
    """Layers judged against a fix per (rank, step): a run holding one step number twice on one
    rank (ranks merged when it was written) is one message, not a pandas length error."""
    import pandas as pd
    import pytest

    from mlaprof.analysis.layers import reference_s
    from mlaprof.errors import MlaprofError

    layers = pd.DataFrame({"rank": [0, 0], "step": [0, 1], "splits_deserved": [None, None]})
    fine = pd.DataFrame({"rank": [0, 0], "step": [0, 1], "fix": [4, 8]})
    assert reference_s(layers, fine).tolist() == [4, 8]
    twice = pd.DataFrame({"rank": [0, 0, 0], "step": [0, 0, 1], "fix": [4, 5, 8]})
    with pytest.raises(MlaprofError, match="one step number twice on one rank"):
        reference_s(layers, twice)

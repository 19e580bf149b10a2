"""A value the run does not hold reads the same in a figure's hover as in every other view:
the figures' ``said`` said "unknown" for an empty string where the rows layer's ``value_text``
said "none". Both now take the one rule (:func:`mlaprof.reporters.fmt.gap_text`), and a step
with no recorded timing is handed to the hover as None (it read "" there). Each test failed with
its rule broken."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mlaprof.analysis.series import timeline
from mlaprof.figures._common import said
from mlaprof.reporters.fmt import NONE, UNKNOWN, gap_text, value_text

GAPS = [None, float("nan"), math.nan, "", [], (), {}]
HELD = [0, -1, 3, 2.5, "graph-replay", "none", [1], (0,)]


@pytest.mark.parametrize("v", GAPS, ids=repr)
def test_a_gap_reads_alike_in_a_hover_and_in_every_other_view(v: object) -> None:
    assert said(v) == value_text(v) == gap_text(v), (v, said(v), value_text(v))
    assert said(v) in (UNKNOWN, NONE)


def test_the_rule_tells_no_value_from_an_empty_one() -> None:
    assert said(None) == said(float("nan")) == UNKNOWN
    assert said("") == value_text("") == NONE


@pytest.mark.parametrize("v", HELD, ids=repr)
def test_a_held_value_is_handed_on_as_it_is(v: object) -> None:
    """The hover template formats it (a step, a count): never turned into words here, and a
    count of 0 or an S of -1 recorded as such is not a gap (the series hand None for one)."""
    assert gap_text(v) is None and said(v) is v


def test_a_step_with_no_recorded_timing_reads_unknown_in_its_hover() -> None:
    steps = pd.DataFrame(
        {
            "step": [0, 1],
            "t_start_ns": [0, 2_000],
            "duration_ns": [1_000, 1_000],
            "graph_mode": ["FULL", "FULL"],
            "timing": [None, ""],
            "num_reqs": [4, 4],
        }
    )
    layers = pd.DataFrame(columns=["step", "layer", "t_start_ns", "duration_ns", "syncs"])
    tl = timeline({"kernels": pd.DataFrame()}, 0, steps, layers)
    assert tl is not None
    step_bars = [b for b in tl.bars if b.series.startswith("step:")]
    assert len(step_bars) == 2, tl.bars
    assert [said(b.detail[1]) for b in step_bars] == [UNKNOWN, UNKNOWN], step_bars

"""A count's noun agrees with the count in every text mlaprof prints: "1 step checked", "6
steps", "1 eager step short of MLA layers", "3 graph launches", never "step(s)" (the default
run's headline read "syncs in region: 0 (1 step(s) checked)" and "over 6 step(s)"). The
analyzers write a unit with its plural marked ("step(s)", "launch(es)") and one function
resolves it by the count (mlaprof.rank_counts.plural); every view of every shipped run, trace
and log is checked for a marker left unresolved."""

from __future__ import annotations

import re

import pytest

from mlaprof.rank_counts import counted, per_rank_count, plural
from tests import made_runs, shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
MARKER = re.compile(r"[A-Za-z]\((?:e?s)\)")


def test_a_unit_agrees_with_its_count() -> None:
    assert [counted(n, "step(s)") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
    assert plural("graph launch(es)", 1) == "graph launch"
    assert plural("graph launch(es)", 3) == "graph launches"
    # a count said as text (a range of layers per pass, "1-2"), and no count at all
    assert (
        plural("MLA layer(s)", "1") == "MLA layer" and plural("MLA layer(s)", "1-2") == "MLA layers"
    )
    assert plural("layer(s)", None) == "layers" and plural("steps", 1) == "steps"


def test_a_count_per_rank_agrees_with_it() -> None:
    assert per_rank_count({0: 1}, "step(s)") == "1 step"
    assert per_rank_count({0: 1, 1: 1}, "step(s)") == "1 step per rank (2 ranks)"
    # a range over ranks counts several, even from 1
    assert per_rank_count({0: 1, 1: 2}, "step(s)") == "1-2 steps per rank (ranks 0: 1, 1: 2)"
    assert per_rank_count({0: 0, 1: 1}, "step(s)") == "0-1 steps per rank (ranks 0: 0, 1: 1)"
    assert per_rank_count({}, "eager step(s)") == "0 eager steps" and per_rank_count({}) == "0"


@pytest.mark.parametrize("name", shipped_runs.NAMES + made_runs.NAMES)
def test_no_view_prints_a_plural_marker(name: str) -> None:
    runs = made_runs if name in made_runs.NAMES else shipped_runs  # CPU runs: "1 step checked"
    views = every_view(runs.run_dir(name), runs.summary(name), with_json=True)
    left = {v: sorted(set(MARKER.findall(t))) for v, t in views.items() if MARKER.search(t)}
    assert not left, left

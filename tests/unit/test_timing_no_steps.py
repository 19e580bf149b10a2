"""A run with no step recorded (a server log of two starts) said "ranks agree: yes" and "steps
(sum over 2 ranks): 0": nothing recorded is no agreement and no count. Every view says "no steps
recorded" for them, and the JSON document holds null, never 0 or true."""

from __future__ import annotations

import json
import re

from tests import shipped_runs
from tests.view_texts import every_view

WORKER_GROUP = "shipped-runs"
RUN = "log-tp2_two_starts"


def test_a_timing_with_no_steps_says_none_were_recorded_in_every_view() -> None:
    s = shipped_runs.summary(RUN)
    t = s.timing
    assert (t.steps, t.ranks_agree, t.step_median_us) == (None, None, None)
    views = every_view(shipped_runs.run_dir(RUN), s, with_json=True)
    doc = json.loads(views.pop("json"))["timing"]
    assert doc["steps"] is None and doc["ranks_agree"] is None, doc
    for view, text in views.items():
        # the sections' timing rows (a Markdown table's cells, "label | value"): none reads as
        # a count or an agreement
        assert not re.search(r"ranks agree[:| ]+yes", text), view
        assert not re.search(r"steps \(sum over 2 ranks\)[:| ]+0\b", text), view
        for label in ("ranks agree", "steps", "median step", "timing"):
            assert re.search(rf"\b{label}[:| ]+no steps recorded", text), (view, label)

"""A split figure with nothing to draw says why, in the section's words: the run's policy cannot
run on its target (``run --target h200``: mla_gluon asserts gfx950) drew an empty S plot with no
word of it."""

from __future__ import annotations

from dataclasses import replace

from mlaprof.analysis.sections import no_s_text
from mlaprof.figures import _common as c
from mlaprof.figures._common import is_empty
from mlaprof.figures.splits import splits_used_vs_deserved
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
WHY = "mla_gluon asserts gfx950 (aiter mla_gluon.py v0.1.19 L865), the target is sm_90"


def _not_runnable() -> object:
    """A run's splits series whose own policy ran nowhere: no S used, deserved nor frozen."""
    rs, _ = c.series_of(shipped_runs.summary("demo-fix-padding-active-rows-c16"), "splits")
    pts = [
        replace(p, used=None, deserved=None, frozen=None, not_runnable=WHY)
        if p.policy == rs.policy
        else p
        for p in rs.splits
    ]
    meds = [
        replace(m, used=None, deserved=None, frozen=None)
        for m in rs.split_medians
        if m.policy == rs.policy
    ]
    return replace(rs, splits=pts, split_medians=meds)


def _text(fig: object) -> str:
    lay = fig.layout  # type: ignore[attr-defined]
    texts = [lay.xaxis.title.text or "", *(a.text or "" for a in lay.annotations or ())]
    return " ".join(t.replace("<br>", " ") for t in texts)


def test_a_policy_that_cannot_run_is_said_not_drawn_empty() -> None:
    rs = _not_runnable()
    said = no_s_text(next(p for p in rs.splits if p.policy == rs.policy))  # type: ignore[attr-defined]
    assert said is not None and WHY in said
    for by in ("step", "capture_size"):
        fig = splits_used_vs_deserved(rs, by=by)
        drawn = [y for t in fig.data for y in (t.y or ()) if y is not None]
        assert not drawn, by
        assert is_empty(fig), by  # the placeholder every figure uses for "nothing to draw"
        assert said in _text(fig), by


def test_a_policy_with_no_s_beside_drawn_ones_is_said_in_a_note() -> None:
    rs = _not_runnable()
    other = next(p for p in rs.policies if p != rs.policy)  # type: ignore[attr-defined]
    fig = splits_used_vs_deserved(rs, by="step", policy=[rs.policy, other])  # type: ignore[attr-defined]
    assert not is_empty(fig)
    assert f"{rs.policy}: not runnable: {WHY}" in _text(fig)  # type: ignore[attr-defined]

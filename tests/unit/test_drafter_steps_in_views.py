"""A trace with drafter passes (tests/data/aiter/asm_mtp_drafter: 3 verify steps, 9 one-layer
drafter passes between them) reads the same steps in every view: the dashboard (the live fold's
step count, step times and step picker, ``tui --once``) counts and times the report's verify
steps, told apart once by the analysis (the drafter section's ``pass_steps``), and the timeline
title counts the steps it lists (never "steps 0-8 of 3")."""

from __future__ import annotations

import pandas as pd

from mlaprof.analysis.live import verify_steps
from mlaprof.analysis.series import id_spans
from mlaprof.figures.timeline import step_timeline
from mlaprof.tui.once import read_view
from mlaprof.tui.text import header_lines
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"
NAME = "aiter-asm_mtp_drafter"


def test_the_drafter_section_names_its_passes_per_rank() -> None:
    s = shipped_runs.summary(NAME)
    drafter = s.trace.drafter
    assert drafter.pass_steps == {0: [1, 2, 3, 5, 6, 7, 9, 10, 11]}
    assert sum(len(v) for v in drafter.pass_steps.values()) == drafter.steps == 9
    verify = {(t.rank, t.step) for t in s.trace.steps}
    assert not verify & {(r, x) for r, ids in drafter.pass_steps.items() for x in ids}


def test_the_dashboard_counts_and_times_the_reports_verify_steps() -> None:
    s = shipped_runs.summary(NAME)
    view, _ = read_view(shipped_runs.run_dir(NAME))
    report = {r.rank: r.steps for r in s.timing.per_rank}
    assert report == {0: 3}
    assert view.steps_by_rank == report
    assert "3 steps" in header_lines(view)[1]
    assert view.step_ids == sorted(t.step for t in s.trace.steps if t.rank == 0) == [0, 4, 8]
    assert len(view.latency_ms) == 3
    p50 = dict(view.latency)["p50"]
    assert p50 is not None and abs(p50 * 1e3 - s.timing.step_median_us) < 1e-6
    # the layer table covers every step it counts (was "3 of 12 steps with layer records")
    assert view.layer_scope == "all steps"


def test_steps_newer_than_the_summary_stay_in() -> None:
    s = shipped_runs.summary(NAME)
    steps = pd.DataFrame({"rank": [0] * 14, "step": list(range(14))})
    kept = verify_steps(steps, s)["step"].tolist()
    assert kept == [0, 4, 8, 12, 13]
    assert verify_steps(steps, None) is steps  # no summary yet: nothing told apart


def test_the_timeline_title_counts_the_steps_it_lists() -> None:
    tl = shipped_runs.summary(NAME).series.rank().timeline
    assert tl.steps_shown == (0, 4, 8) and tl.steps_total == 3
    title = step_timeline(shipped_runs.summary(NAME)).layout.title.text
    assert "3 of 3 verify steps (step ids 0, 4, 8)" in title, title
    assert "0–8" not in title
    plain = step_timeline(shipped_runs.summary("aiter-gluon_v0119_bug")).layout.title.text
    assert "3 of 3 steps (step ids 0–2)" in plain, plain


def test_id_spans() -> None:
    assert id_spans([0, 4, 8]) == "0, 4, 8"
    assert id_spans([0, 1, 2, 5, 9, 10, 11]) == "0–2, 5, 9–11"
    assert id_spans([3]) == "3"
    assert id_spans(list(range(0, 20, 2)), most=3) == "0, 2, 4, …"


def test_graph_kinds_take_the_kind_of_the_graph_the_import_identified(monkeypatch) -> None:
    """Where the import named each replay's graph and its kind, a step takes that kind (verify
    or drafter) whatever its layer count says; a step of no named graph, of another kind or past
    the import's list keeps the layer-count rule's (None here)."""
    import pandas as pd

    from mlaprof.analysis import drafter

    by_rank = {
        0: {"graphs": [{"graph": "g1", "kind": "verify"}, {"graph": "g2", "kind": "drafter"},
                       {"graph": "g3", "kind": "other"}],
            "graph_by_step": [["g1", 2], ["g2", 1], ["g3", 1]]},
        1: {"graphs": [{"graph": "h", "kind": "drafter"}], "graph_by_step": [["h", 1]]},
    }  # fmt: skip
    monkeypatch.setattr(drafter, "step_checks_by_rank", lambda _checks: by_rank)
    steps = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 1, 0], "step": [0, 1, 2, 3, 0, 5, 9]},
                         index=[10, 11, 12, 13, 14, 15, 16])  # fmt: skip
    got = drafter._by_identity(steps, object())  # type: ignore[arg-type]
    assert list(got.index) == list(steps.index)
    assert [None if pd.isna(v) else v for v in got.tolist()] == [
        "verify", "verify", "drafter", None, "drafter", None, None
    ]  # fmt: skip

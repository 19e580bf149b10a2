"""The capture status of an engine run and of a scenario run of several ranks is judged rank by
rank (each rank's own steps or records), never over their records pooled: the ranks' one status
where they agree, else "per-rank" naming each rank's. Whether a FULL graph serves the steps
stays one rule (``Capture.no_full_graph``): a tensor-parallel step runs on every rank, so a
per-rank capture with one failed rank has none, for the dashboard's red line, the compare's
"capture fails", the claims and the contradiction checks alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mlaprof.analysis.capture_status import CAPTURE_LABELS, CaptureStatus
from tests.unit.test_ranks_never_merged import _words
from tests.view_texts import every_view as _views

REPLAYED, EAGER = CAPTURE_LABELS[CaptureStatus.REPLAYED], CAPTURE_LABELS[CaptureStatus.EAGER]


def _engine_steps(*ranks: list[str]) -> pd.DataFrame:
    modes = [m for ms in ranks for m in ms]
    return pd.DataFrame({"graph_mode": modes,
                         "rank": [r for r, ms in enumerate(ranks) for _ in ms]})  # fmt: skip


# -- engine runs ------------------------------------------------------------------------------
def test_an_engines_capture_is_each_ranks_from_its_own_steps() -> None:
    """Rank 0 ran three FULL steps, rank 1 one eager step: pooled, "the mode most steps ran
    with" read FULL, "replayed" for both ranks. Each rank's is its own (its mode and steps per
    mode kept), the run's "per-rank", its line naming each rank's."""
    from mlaprof.analysis.evidence.engine import engine_capture

    cap = engine_capture(_engine_steps(["FULL"] * 3, ["NONE"]), "m")
    assert cap.status is CaptureStatus.PER_RANK, cap.status
    got = [(r.rank, r.status, r.effective_mode, r.modes) for r in cap.per_rank or []]
    assert got == [(0, CaptureStatus.REPLAYED, "FULL", {"FULL": 3}),
                   (1, CaptureStatus.EAGER, "NONE", {"NONE": 1})]  # fmt: skip
    assert cap.text == f"differs by rank: rank 0 {REPLAYED}; rank 1 {EAGER}", cap.text
    assert (cap.mode, cap.effective_mode) == (None, None)  # no one mode: each rank's row
    assert cap.modes == {"FULL": 3, "NONE": 1} and not cap.no_full_graph


@pytest.mark.parametrize(
    ("rank0", "rank1", "status", "mode"),
    [
        (["FULL"] * 2, ["FULL"], "replayed", "FULL"),
        (["NONE"], ["NONE"] * 3, "eager", "NONE"),
        (["PIECEWISE"], ["PIECEWISE"], "piecewise", "PIECEWISE"),
        # both replay FULL graphs, in modes of their own: one status, no one mode
        (["FULL"], ["FULL_AND_PIECEWISE"], "replayed", None),
    ],
)
def test_an_engines_ranks_that_agree_give_their_status(
    rank0: list[str], rank1: list[str], status: str, mode: str | None
) -> None:
    from mlaprof.analysis.evidence.engine import engine_capture

    cap = engine_capture(_engine_steps(rank0, rank1), "m")
    # no resolution recorded: the mode asked for is not said (never the mode the steps ran)
    assert (str(cap.status), cap.mode, cap.effective_mode) == (status, None, mode)
    assert [str(r.status) for r in cap.per_rank or []] == [status, status]
    assert cap.label == CAPTURE_LABELS[CaptureStatus(status)]


def test_a_one_rank_engines_capture_is_as_before() -> None:
    """One rank (or rows without a rank): the mode most steps ran with, no per-rank rows."""
    from mlaprof.analysis.evidence.engine import engine_capture

    for steps in (_engine_steps(["FULL", "FULL", "PIECEWISE"]),
                  pd.DataFrame({"graph_mode": ["FULL", "FULL", "PIECEWISE"]})):  # fmt: skip
        cap = engine_capture(steps, "m", {0: ("FULL", "FULL")})
        assert (cap.mode, cap.effective_mode, str(cap.status), cap.modes, cap.per_rank) == (
            "FULL", "FULL", "replayed", {"FULL": 2, "PIECEWISE": 1}, None)  # fmt: skip
        assert cap.text == "FULL -> replayed (runs FULL)"


def _engine_run(traces: Path, name: str, *ranks: list[str]) -> Path:
    """A recorded engine run whose ranks ran their steps in the given graph modes."""
    from mlaprof.recording import event_row
    from mlaprof.store import create_run

    meta = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}
    for rank, modes in enumerate(ranks):
        w = create_run(traces, name, meta, rank=rank)
        for i, mode in enumerate(modes):
            step = {"step": i, "kind": "verify", "backend": "TRITON_MLA", "builder": "b",
                    "heads": 16, "graph_mode": mode, "num_tokens": 8, "padded_tokens": 8,
                    "verify_rows": 2, "verify_draft_tokens": 6, "verify_rows_as_prefill": 0,
                    "drafter_builds": 0, "spec_method": "mtp", "num_speculative_tokens": 3}  # fmt: skip
            w.add("events", **event_row("vllm", "engine-step", "s", step))
            w.add("steps", step=i, t_start_ns=i * 1000, duration_ns=500, num_reqs=2,
                  num_real_reqs=2, qlen=4, real_tokens=8, padded_tokens=8, graph_mode=mode,
                  backend="TRITON_MLA", timing="dispatch-interval")  # fmt: skip
        w.finish()
    return traces / name


def test_an_engines_per_rank_capture_shows_in_every_view_and_the_json(tmp_path: Path) -> None:
    import mlaprof

    run_dir = _engine_run(tmp_path, "eng", ["FULL"] * 3, ["NONE"] * 2)
    with mlaprof.load(run_dir) as run:
        s = mlaprof.build_summary(run)
    said = f"differs by rank: rank 0 {REPLAYED}; rank 1 {EAGER}"
    assert s.capture.text == said
    doc = json.loads(json.dumps(s.to_json()))["capture"]
    assert (doc["status"], doc["text"]) == ("per-rank", said)
    assert [(r["rank"], r["status"], r["effective_mode"], r["modes"]) for r in doc["per_rank"]] == [
        (0, "replayed", "FULL", {"FULL": 3}),
        (1, "eager", "NONE", {"NONE": 2}),
    ]
    for name, text in _views(run_dir, s).items():
        assert said in text, name
        w = _words(text)
        assert "rank status mode that ran modes" in w, name
        assert "0 replayed FULL FULL 3" in w and "1 eager NONE NONE 2" in w, name
        assert "modes sum over 2 ranks" in w, name  # the run's steps per mode add the ranks'


# -- scenario runs ----------------------------------------------------------------------------
def _scenario(traces: Path, name: str, failed: tuple[int, ...]) -> Path:
    """A two-rank FULL scenario run: the ``failed`` ranks' captures failed (no graph kept,
    PIECEWISE after), the others' captured."""
    from mlaprof.store import create_run
    from mlaprof.synthetic.dashboard import meta, write_captures, write_step

    for rank in (0, 1):
        w = create_run(traces, name, meta(name, False), rank=rank)
        write_captures(w, bug=rank in failed)
        for step in range(3):
            write_step(w, step, 2, False)
        w.finish()
    return traces / name


def _summary(run_dir: Path) -> Any:
    import mlaprof

    with mlaprof.load(run_dir) as run:
        return mlaprof.build_summary(run)


def test_a_scenario_run_with_one_failed_rank_is_per_rank_and_has_no_full_graph(
    tmp_path: Path,
) -> None:
    """Rank 0 captured its FULL graphs, rank 1's capture failed: pooled, a failed capture on any
    rank won ("failed" for both). It is "per-rank", each rank's verdict and the mode it ran its
    own; and no FULL graph serves the steps (rank 1 runs PIECEWISE), so the dashboard's line is
    red, the compare counts a failing capture, no frozen S is claimed and the capture finding
    names rank 1."""
    import mlaprof
    from mlaprof.analysis.claims import claims_of
    from mlaprof.analysis.contradictions import contradictions
    from mlaprof.analysis.diff import diff_table
    from mlaprof.analysis.evidence import collect
    from mlaprof.tui.once import read_view

    run_dir = _scenario(tmp_path, "one-failed", failed=(1,))
    s = _summary(run_dir)
    cap = s.capture
    assert cap.status is CaptureStatus.PER_RANK, cap.status
    assert [(r.rank, str(r.status), r.effective_mode) for r in cap.per_rank or []] == [
        (0, "captured", "FULL"),
        (1, "failed", "PIECEWISE"),
    ]
    said = "FULL -> differs by rank: rank 0 captured; rank 1 failed"
    assert cap.text == said, cap.text
    assert cap.no_full_graph
    with mlaprof.load(run_dir) as run:
        assert not claims_of(collect(run)).full_graph
    good = _summary(_scenario(tmp_path, "both-captured", failed=()))
    (row,) = [r for r in diff_table(good, s) if r["metric"].startswith("capture fails")]
    assert (row["a"], row["b"]) == (0.0, 1.0), row
    view, _ = read_view(run_dir)
    assert view.capture_failed and view.capture == said
    (f,) = [f for f in s.findings if f.kind == "capture"]
    assert f.severity == "critical" and f.data["ranks"] == [1], f
    assert f.title.startswith("FULL graph capture failed on rank 1 of 2; the engine runs "
                              "PIECEWISE there instead: first offender"), f.title  # fmt: skip
    assert contradictions(s) == []
    doc = json.loads(json.dumps(s.to_json()))["capture"]
    assert (doc["status"], doc["text"]) == ("per-rank", said)
    for name, text in _views(run_dir, s).items():
        assert said in text.replace("\\", ""), name  # Markdown's escapes
        assert "0 captured 48.00 MiB FULL" in _words(text), name
        assert "1 failed unknown PIECEWISE" in _words(text), name


def test_a_per_rank_capture_with_a_failed_rank_contradicts_a_frozen_s(tmp_path: Path) -> None:
    """The contradiction checks read the one rule: an S said frozen into a FULL graph beside a
    per-rank capture whose rank 1 failed is a contradiction, as beside a failed capture."""
    from mlaprof.analysis.contradictions import contradictions
    from mlaprof.analysis.findings import Finding

    s = _summary(_scenario(tmp_path, "one-failed", failed=(1,)))
    frozen = Finding("split-frozen", "warning", "S frozen", "e", "f")
    said = contradictions(dataclasses.replace(s, findings=[*s.findings, frozen]))
    assert "capture per-rank + an S frozen into a FULL graph" in said, said


def test_a_scenario_run_whose_ranks_all_failed_is_failed(tmp_path: Path) -> None:
    s = _summary(_scenario(tmp_path, "all-failed", failed=(0, 1)))
    cap = s.capture
    assert (str(cap.status), cap.effective_mode) == ("failed", "PIECEWISE")
    assert [str(r.status) for r in cap.per_rank or []] == ["failed", "failed"]
    assert cap.text == "FULL -> failed (runs PIECEWISE)" and cap.no_full_graph
    (f,) = [f for f in s.findings if f.kind == "capture"]
    assert "on rank" not in f.title and "ranks" not in f.data, f


def test_no_full_graph_of_a_per_rank_status_is_any_ranks() -> None:
    """The one rule over each rank's own verdict: one rank with no FULL graph is enough; ranks
    that replay or run eagerly (no failure) have none to lose."""
    from mlaprof.analysis.capture_status import no_full_graph
    from mlaprof.analysis.sections import RankCapture

    def per(*statuses: str) -> list[RankCapture]:
        return [RankCapture(rank=r, status=CaptureStatus(s)) for r, s in enumerate(statuses)]

    assert no_full_graph("per-rank", None, per("captured", "failed"))
    assert no_full_graph("per-rank", None, per("predicted-ok", "predicted-fail"))
    assert not no_full_graph("per-rank", None, per("replayed", "eager"))
    assert not no_full_graph("per-rank", None, per("captured", "predicted-ok"))


# -- the mode that ran, where the ranks ran their own -----------------------------------------
@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("engine", "differs by rank: rank 0 FULL; rank 1 NONE"),
        ("scenario", "differs by rank: rank 0 FULL; rank 1 PIECEWISE"),
    ],
)
def test_a_per_rank_captures_mode_that_ran_names_each_ranks_in_every_view(
    tmp_path: Path, case: str, said: str
) -> None:
    """Each rank's mode is known (its ``per_rank`` row), the run's one ``effective_mode`` None:
    every view printed "mode that ran: unknown". It says the mode differs by rank, naming each
    rank's; the JSON keeps null there and each rank's mode in its row; the one rule of no FULL
    graph, the capture finding and the dashboard's mode read as before."""
    if case == "engine":
        run_dir = _engine_run(tmp_path, "eng", ["FULL"] * 3, ["NONE"] * 2)
        modes, no_full = ["FULL", "NONE"], False
    else:
        run_dir = _scenario(tmp_path, "one-failed", failed=(1,))
        modes, no_full = ["FULL", "PIECEWISE"], True
    s = _summary(run_dir)
    cap = s.capture
    assert cap.status is CaptureStatus.PER_RANK and cap.effective_mode is None
    assert cap.modes_by_rank == said and cap.no_full_graph is no_full
    doc = json.loads(json.dumps(s.to_json()))["capture"]
    assert doc["effective_mode"] is None
    assert [r["effective_mode"] for r in doc["per_rank"]] == modes
    found = [f.title for f in s.findings if f.kind == "capture"]
    if case == "scenario":  # the finding names the failing rank's own mode, as before
        assert found[0].startswith("FULL graph capture failed on rank 1 of 2; the engine runs "
                                   "PIECEWISE there instead"), found  # fmt: skip
    for name, text in _views(run_dir, s).items():
        w = _words(text)
        assert "mode that ran unknown" not in w, name
        assert _words(f"mode that ran {said}") in w, name
    from mlaprof.tui.once import read_view

    assert read_view(run_dir)[0].graph_mode == said


def test_ranks_of_one_mode_or_of_no_said_mode_read_as_before() -> None:
    """The mode that ran is the ranks' one mode where they agree, "unknown" where no rank's is
    said; ranks that replay FULL graphs in modes of their own are named."""
    from mlaprof.analysis.evidence.engine import engine_capture
    from mlaprof.analysis.sections import RankCapture
    from mlaprof.reporters.rows import _blocks

    def mode_row(cap: Any) -> str:
        (row,) = [r for b in _blocks("capture", "c", cap) for r in b.rows
                  if r.key == "capture.effective_mode"]  # fmt: skip
        return row.text

    assert mode_row(engine_capture(_engine_steps(["FULL"], ["FULL"]), "m")) == "FULL"
    two = engine_capture(_engine_steps(["FULL"], ["FULL_AND_PIECEWISE"]), "m")
    assert str(two.status) == "replayed"
    assert mode_row(two) == "differs by rank: rank 0 FULL; rank 1 FULL_AND_PIECEWISE"
    none_said = dataclasses.replace(
        two, per_rank=[RankCapture(rank=r, status=CaptureStatus.REPLAYED) for r in (0, 1)]
    )
    assert none_said.modes_by_rank is None and mode_row(none_said) == "unknown"


def test_an_engines_mode_asked_for_is_read_alike_by_the_claims_and_the_consistency_checks(
    tmp_path: Path,
) -> None:
    """An engine's run.json names no graph mode; vLLM's resolution record does
    (FULL_AND_PIECEWISE, steps replayed FULL): the claims and the summary's consistency checks
    read the same mode asked for (claims.asked_mode), so both say a FULL graph serves the steps."""
    import mlaprof
    from mlaprof.analysis.capture_status import asked_mode
    from mlaprof.analysis.claims import claims_of
    from mlaprof.analysis.contradictions import contradictions
    from mlaprof.analysis.evidence import collect
    from mlaprof.recording import event_row
    from mlaprof.store import create_run

    meta = {"kind": "engine", "source": "vllm plugin", "scenario": {"name": "vllm-engine"}}
    w = create_run(tmp_path, "asked", meta, rank=0)
    w.add("events", **event_row("vllm", "cudagraph-mode", "m", {
        "requested": "FULL_AND_PIECEWISE", "resolved": "FULL_AND_PIECEWISE"}))  # fmt: skip
    for i in range(3):
        step = {"step": i, "kind": "verify", "backend": "TRITON_MLA", "builder": "b",
                "heads": 16, "graph_mode": "FULL", "num_tokens": 8, "padded_tokens": 8,
                "verify_rows": 2, "verify_draft_tokens": 6, "verify_rows_as_prefill": 0,
                "drafter_builds": 0, "spec_method": "mtp", "num_speculative_tokens": 3}  # fmt: skip
        w.add("events", **event_row("vllm", "engine-step", "s", step))
        w.add("steps", step=i, t_start_ns=i * 1000, duration_ns=500, num_reqs=2,
              num_real_reqs=2, qlen=4, real_tokens=8, padded_tokens=8, graph_mode="FULL",
              backend="TRITON_MLA", timing="dispatch-interval")  # fmt: skip
    w.finish()
    s = _summary(tmp_path / "asked")
    with mlaprof.load(tmp_path / "asked") as run:
        claims = claims_of(collect(run))
    assert s.scenario.graph_mode is None and s.capture.mode == "FULL_AND_PIECEWISE"
    assert claims.graph_mode == asked_mode(s.scenario.graph_mode, s.capture.mode)
    assert claims.full_graph and contradictions(s) == []
    # a modelled frozen S stands where a FULL graph serves: the checks read it as the claims do
    import dataclasses

    frozen = dataclasses.replace(s.full_graph_splits, modelled=4)
    assert contradictions(dataclasses.replace(s, full_graph_splits=frozen)) == []

"""The live dashboard (its follower's view, what every panel draws) and the report tell one story
about a run: its state (starting / failed / abandoned before its first record, and why), its
reason ("no reason" is one value), and its steps (the report's verify steps: an imported trace's
start-up warm-ups and drafter passes left out, and no count at all before the analysis told them
apart). Every run here is built in a tmp folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlaprof.analysis.run_summary import build_summary
from mlaprof.cli import main
from mlaprof.store import load, runmeta
from mlaprof.store.liveness import WriterLock
from mlaprof.store.reader import run_info
from mlaprof.synthetic.dashboard import make_run
from mlaprof.tui.follower import RunFollower
from mlaprof.tui.once import read_view
from mlaprof.tui.text import header_lines, latency_line, render_text
from mlaprof.tui.view import ANALYSING, View
from tests import shipped_runs
from tests.conformance import render
from tests.unit.test_capture_phase import whole_process
from tests.unit.test_run_folder_rule import _error  # one message, exit 2, no traceback

WORKER_GROUP = "shipped-runs"
DRAFTER = "aiter-asm_mtp_drafter"  # 3 verify steps, 9 drafter passes between them


def _json(run: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    if main(["report", str(run), "--json"]) != 0:
        raise AssertionError(capsys.readouterr().err)
    return json.loads(capsys.readouterr().out)


def _dashboard(run: Path) -> View:
    """What the live dashboard draws after polling every committed row (no full pass yet)."""
    f = RunFollower(run)
    try:
        f.catch_up()
        return f.view()
    finally:
        f.close()


@pytest.mark.parametrize("case", ["abandoned", "failed", "starting"])
def test_a_run_without_records_reads_one_state_live_and_in_the_report(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the dashboard said "waiting for the first records" where report said abandoned
    run = runmeta.init_run_dir(tmp_path / "t", "r", {"source": "test"})
    if case == "failed":
        runmeta.update(run, status="failed", reason="disk full")
    lock = WriterLock(run, 0) if case == "starting" else None  # its database on the way
    try:
        said = _error(["report", str(run)], capsys)
        v = _dashboard(run)
        listed = run_info(run).status
        snapshot = _error(["tui", str(run), "--once"], capsys)  # the dashboard's snapshot
    finally:
        if lock is not None:
            lock.release()
    assert v.status == listed == case
    assert v.problem == said == snapshot  # the banner and the snapshot say the report's words
    assert ("disk full" in said) == (case == "failed")
    assert case in said or case == "failed", said  # abandoned or starting, said so
    assert f"|  {case}  |" in header_lines(v)[0]


def test_a_finished_runs_reason_is_one_none_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, "done", steps=3, layers=2)
    doc = _json(run, capsys)
    assert "reason" in doc["state"] and doc["state"]["reason"] is None  # was "" (run.reason None)
    with load(run) as r:
        assert r.reason is None and r.meta.get("reason") is None
        assert build_summary(r).state.reason is None
    # the dashboard's own summaries: the live fold's provisional one and the full pass
    f = RunFollower(run)
    f.catch_up()
    f.summarise()
    assert f.summary() is not None and f.summary().state.reason is None
    with load(run) as r:
        f.land_full(build_summary(r), "", f.fold.version)
    assert f.summary().state.reason is None
    f.close()
    # and one wording: the report's sections and the dashboard's (tui --once) say it alike
    assert main(["report", str(run)]) == 0
    report = capsys.readouterr().out
    assert main(["tui", str(run), "--once"]) == 0
    once = capsys.readouterr().out
    for text in (report, once):
        assert re.search(r"^\s*reason: none recorded$", text, re.M), text


def test_before_its_analysis_the_dashboard_counts_no_drafter_pass_as_a_step() -> None:
    """An imported trace's steps are told apart by its full pass only: until it lands the
    dashboard says "analysing..." (it counted the 9 drafter passes: "12 steps" against the
    report's 3); then the report's count."""
    run = shipped_runs.run_dir(DRAFTER)
    s = shipped_runs.summary(DRAFTER)
    f = RunFollower(run)
    try:
        f.catch_up()
        f.summarise()
        v = f.view()
        assert v.summary is None  # no full pass yet
        assert v.steps_text == ANALYSING and v.steps_by_rank == {} and not v.steps_decided
        assert v.latency_ms == [] and v.step_ids == []
        assert ANALYSING in latency_line(v)
        assert not re.search(r"\d+ step\(s\)", render_text(v)), render_text(v)
        f.land_full(s, "", f.fold.version)
        v = f.view()
        assert v.steps_by_rank == {0: s.state.steps_committed} == {0: 3}
        assert v.steps_text == "3 steps" and len(v.latency_ms) == 3
    finally:
        f.close()


@pytest.fixture
def whole_process_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A whole-process trace: 4 eager warm-up forwards and their captures, then 6 replays."""
    tr, _ = whole_process()
    path, _ = render(tr, "csv-7", tmp_path / "in")
    argv = ["import", "rocprof", str(path), "--traces", str(tmp_path / "t"), "--name", "x"]
    assert main(argv) == 0
    capsys.readouterr()
    return tmp_path / "t" / "x"


def test_the_dashboard_leaves_out_the_warmups_the_report_leaves_out(
    whole_process_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _json(whole_process_run, capsys)
    (phase,) = doc["trace"]["capture_phase"]["ranks"]
    assert phase["warmup_step_ids"] == [0, 1, 2, 3]
    assert doc["state"]["steps_committed"] == doc["timing"]["steps"] == 6
    v, s = read_view(whole_process_run)  # tui --once and the dashboard once its pass landed
    assert s is not None
    assert v.steps_by_rank == {0: 6} and v.steps_text == "6 steps"  # was 10
    assert v.step_ids == [4, 5, 6, 7, 8, 9]
    assert len(v.latency_ms) == 6
    p50 = dict(v.latency)["p50"]
    assert p50 is not None and abs(p50 * 1e3 - doc["timing"]["step_median_us"]) < 1e-6


@pytest.mark.parametrize("name", shipped_runs.NAMES)
def test_every_shipped_run_counts_the_reports_steps_live(name: str) -> None:
    """The dashboard's steps per rank (the follower's rows, less what the summary left out)
    reach as far as the report's ``state`` says: its fewest steps per rank and the last step
    every rank reached."""
    s = shipped_runs.summary(name)
    f = RunFollower(shipped_runs.run_dir(name))
    try:
        f.catch_up()
        f.land_full(s, "", f.fold.version)
        ids = f.latest.step_ids if f.latest else {}
    finally:
        f.close()
    counts = [len(v) for v in ids.values()] or [0]
    assert min(counts) == s.state.steps_committed, (ids.keys(), counts, s.state)
    last = min((max(v) for v in ids.values() if v), default=None)
    assert last == s.state.last_step

"""A CSV export says what rocprofv3's CSV layout cannot carry and what an import of it reads
differently, checked against what a re-import really reads: a recorded GPU run's steps, capture
verdict, syncs, padding, capture memory, device and scenario, and a killed run's status. An
imported trace's export, which reads back as that trace, is told it loses nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mlaprof
from mlaprof.cli import main
from mlaprof.exporters.csv_export import csv_losses
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import create_run
from mlaprof.tui.export import export_run
from tests import shipped_demo

# a summary fact, and the loss (csv_losses' ``what``) that must be named when it changes
FACTS: dict[str, tuple[Callable[[Any, mlaprof.store.Run], Any], str]] = {
    "steps per rank": (lambda s, r: r.count_per_rank("steps"), "steps"),
    "capture verdict": (lambda s, r: (s.capture.status, s.capture.memory_bytes), "captures"),
    "capture memory": (lambda s, r: s.capture.memory_bytes, "memory"),
    "syncs": (lambda s, r: s.sync_counts.total, "syncs"),
    "padding": (lambda s, r: s.padding.padding_rows, "padding"),
    "device": (lambda s, r: s.device, "device"),
    "scenario": (lambda s, r: (s.scenario, s.backend), "scenario"),
    "status": (lambda s, r: s.status, "status"),
}


def _export(run: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["export", str(run), "--format", "csv", "-o", str(out)]) == 0
    return capsys.readouterr().err


def _round_trip(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[str, list[Any], dict[str, tuple[Any, Any]]]:
    """The export's warning, its typed losses, and each fact before and after a re-import."""
    warned = _export(run, tmp_path / "csv", capsys)
    with mlaprof.load(run) as r:
        losses = csv_losses(r)
        before = {k: f(mlaprof.build_summary(r), r) for k, (f, _) in FACTS.items()}
    back, _ = import_rocprof(tmp_path / "csv", tmp_path / "t", "back")
    with mlaprof.load(back) as b:
        after = {k: f(mlaprof.build_summary(b), b) for k, (f, _) in FACTS.items()}
    return warned, losses, {k: (before[k], after[k]) for k in FACTS}


@pytest.mark.parametrize(
    "name", ["bug-legacy-flat-syncs-break-capture", "fix-native-kernel-full-graph"]
)
def test_a_recorded_gpu_runs_csv_export_names_everything_a_reimport_reads_differently(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warned, losses, facts = _round_trip(shipped_demo.run(name), tmp_path, capsys)
    named = {loss.what for loss in losses}
    changed = {k for k, (a, b) in facts.items() if a != b}
    assert {"steps per rank", "capture verdict", "device", "scenario"} <= changed, facts
    for fact in changed:
        assert FACTS[fact][1] in named, (fact, facts[fact], named)
    # the warning is the typed losses, printed at export, with the lossless way out
    assert warned.startswith("mlaprof: warning: the rocprofv3 CSV layout"), warned
    for loss in losses:
        assert loss.text in warned
    assert "export --format rocpd keeps every table" in warned
    # the steps it announces are the most a re-import finds (the kernels' own steps)
    (steps,) = [loss for loss in losses if loss.what == "steps"]
    most = int(re.search(r"at most (\d+) step", steps.instead).group(1))
    rebuilt = sum(facts["steps per rank"][1].values())
    assert rebuilt <= most < sum(facts["steps per rank"][0].values()), (rebuilt, most, facts)


def test_a_killed_runs_csv_export_says_the_reimport_reads_finished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = create_run(tmp_path / "t", "killed", {"source": "test"})
    for i in range(3):
        w.add("kernels", name="k", device=0, stream=0, correlation=i + 1,
              start_ns=1000 + 400 * i, end_ns=1300 + 400 * i, grid_x=64, grid_y=1,
              grid_z=1, block_x=64, block_y=1, block_z=1)  # fmt: skip
    w._con.commit()
    w._lock.release()  # its writer gone without closing its record
    warned, losses, facts = _round_trip(w.run_dir, tmp_path, capsys)
    assert facts["status"] == ("incomplete", "finished")
    assert [loss.what for loss in losses] == ["status"]
    assert "the run is incomplete" in warned and "reads as a finished trace" in warned


def test_an_imported_traces_csv_export_loses_nothing_and_reads_back_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a recorded run's CSVs, imported: a trace; its own CSV export reads back as that trace
    assert main(["export", str(shipped_demo.run("fix-native-kernel-full-graph")), "--format",
                 "csv", "-o", str(tmp_path / "first")]) == 0  # fmt: skip
    trace, _ = import_rocprof(tmp_path / "first", tmp_path / "t", "trace")
    warned, losses, facts = _round_trip(trace, tmp_path / "again", capsys)
    assert losses == [] and "warning" not in warned, warned
    assert all(a == b for a, b in facts.values()), facts


def test_the_help_and_the_dashboards_export_say_what_the_csv_cannot_carry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in ("carry kernels, API calls and transfers only", "steps counted from the kernels",
                  "no capture verdict", "a killed run as finished", "rocpd keeps every table"):  # fmt: skip
        assert words in text, words
    ok, said = export_run(shipped_demo.run("fix-native-kernel-full-graph"), tmp_path / "out")
    assert ok and "the CSVs leave out steps" in said and "captures" in said, said
    assert "rocpd file keeps every table" in said


def test_kernels_graph_ids_are_named_lost_and_a_reimport_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = create_run(tmp_path / "t", "graphs", {"source": "rocprof", "kind": "trace"})
    for i in range(3):
        w.add("kernels", name="k", device=0, stream=0, correlation=1, graph_id=7,
              graph_node_id=i, start_ns=1000 + 400 * i, end_ns=1300 + 400 * i, grid_x=64,
              grid_y=1, grid_z=1, block_x=64, block_y=1, block_z=1)  # fmt: skip
    w.finish()
    warned = _export(w.run_dir, tmp_path / "csv", capsys)
    with mlaprof.load(w.run_dir) as run:
        assert [loss.what for loss in csv_losses(run)] == ["graph ids"]
    assert "3 kernels name the graph" in warned
    back, _ = import_rocprof(tmp_path / "csv", tmp_path / "t", "back")
    with mlaprof.load(back) as b:
        assert b.kernels["graph_id"].isna().all()

"""The Markdown renderer (``report --format md``): every line from the summary, escaped for a
table; each run's summary built once per command, the diff read from the two summaries."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis import run_summary as rs
from mlaprof.analysis.timing import replayed_share
from mlaprof.cli import main
from mlaprof.reporters.markdown import cell, render_markdown
from tests import shipped_demo, shipped_runs

ROOT = Path(__file__).resolve().parents[2]
DEMOS = [shipped_demo.run(n) for n in shipped_demo.NAMES]
# the demo runs' summaries, built once per worker (tests/shipped_runs.py; the tests only read
# them), shared with the figure, golden-document and renderer tests
WORKER_GROUP = "shipped-runs"


def _summary(run_dir: Path) -> rs.RunSummary:
    return shipped_runs.summary(f"demo-{run_dir.name}")


@pytest.mark.parametrize("run_dir", DEMOS, ids=[p.name for p in DEMOS])
def test_every_finding_and_headline_row_is_rendered(run_dir: Path) -> None:
    s = _summary(run_dir)
    md = render_markdown(s)
    for f in s.findings:
        assert cell(f.title) in md
    bullets = [ln for ln in md.splitlines() if ln.startswith("- **")]
    assert len(bullets) == len(s.findings)
    for h in s.headline:
        assert f"| {cell(h.label)} | {cell(h.value)} |" in md
    assert f"status **{s.status}**" in md


def test_cells_cannot_break_the_table() -> None:
    assert cell("a|b\nc\x1b[31m") == "a\\|b c \\[31m"
    from dataclasses import replace

    from mlaprof.analysis.findings import Finding

    real = _summary(DEMOS[0])
    bad = Finding(kind="x", severity="warning", title="x | y\nz", evidence="e", fix="f")
    md = render_markdown(replace(real, run="r|1", findings=[bad]))
    assert "x \\| y z" in md and "`r|1`" in md  # a heading's code span, not a table cell


def _steps(timing: list[str], mode: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"timing": timing, "graph_mode": mode})


def test_a_cpu_run_replays_nothing_so_it_has_no_replay_share() -> None:
    assert replayed_share(_steps(["cpu-wall"] * 3, ["FULL"] * 3)) is None
    gpu = _steps(["graph-replay", "graph-replay-twin", "eager-events", "graph-replay"],
                 ["FULL", "FULL", "PIECEWISE", "FULL"])  # fmt: skip
    assert replayed_share(gpu) == 0.75
    trace = _steps(["trace", "trace"], ["graph", "eager"])
    assert replayed_share(trace) == 0.5
    # an engine's steps: the dispatcher's mode, timed from one dispatch to the next
    engine = _steps(["dispatch-interval"] * 4, ["FULL", "FULL", "PIECEWISE", "NONE"])
    assert replayed_share(engine) == 0.5


def test_report_builds_each_summary_once(monkeypatch, capsys) -> None:
    calls: list[str] = []
    real = rs.build_summary

    def counting(run, shadow=None, **series):  # noqa: ANN001, ANN003, ANN202
        calls.append(run.name)
        return real(run, shadow, **series)

    monkeypatch.setattr(rs, "build_summary", counting)
    a, b = (str(DEMOS[0]), str(DEMOS[1]))
    for fmt in ("md", "json"):
        calls.clear()
        assert main(["report", a, "--compare", b, "--format", fmt]) == 0
        assert sorted(calls) == sorted([Path(a).name, Path(b).name])
    out = capsys.readouterr().out
    assert f"### `{Path(a).name}` → `{Path(b).name}`" in out


def test_json_and_another_format_is_one_clear_error(capsys) -> None:
    assert main(["report", str(DEMOS[0]), "--json", "--format", "md"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlaprof: error: --json and --format md")


def test_the_replay_share_row_is_there_for_gpu_runs_and_absent_for_cpu_ones() -> None:
    from mlaprof.analysis.diff import diff_table

    # a real H200 run: its steps were replayed or ran eager (its report --json document)
    s = _summary(DEMOS[0]).to_json()
    rows = [r for r in diff_table(s, s) if r["metric"] == "steps replayed as a graph"]
    assert len(rows) == 1 and rows[0]["a"] == 100.0 * s["timing"]["full_share"]
    cpu = {**s, "timing": {**s["timing"], "full_share": None}}
    assert not [r for r in diff_table(cpu, cpu) if r["metric"] == "steps replayed as a graph"]

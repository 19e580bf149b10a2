"""Compare only like with like, in every view: ``report A --compare B`` (terminal, ``--format
md``, ``--html``) and ``tui A --once --compare B`` lay out the one diff block
(:func:`mlaprof.reporters.diff_rows.diff_block`). Two shipped runs of different workloads (the
c16 bug run against the long-context device-split fix: batch, KV lengths and the modelled
target differ) must read "different workloads" in each view, and no workload-dependent row may
read better or worse; two runs whose workload is not known to be the same read "not judged"
in each; two runs of the same workload keep their verdicts."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from mlaprof.analysis.diff import METRICS, SHORT_NAMES, diff
from mlaprof.cli import main
from mlaprof.reporters.diff_rows import diff_block
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"

BUG = "demo-bug-padding-collapses-splits-c16"
OTHER = "demo-fix-splits-decided-on-device-c1-long"  # another workload
SAME = "demo-fix-padding-active-rows-c16"  # the same workload, fixed
DEPENDENT = [m.name for m in METRICS if m.workload]


def _out(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def compare_views(a: str, b: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Each view's compare, as a reader sees it: one line per table row (rules, Markdown cell
    bars and HTML cells dropped)."""
    da, db = str(shipped_runs.run_dir(a)), str(shipped_runs.run_dir(b))
    page = tmp / "c.html"
    out = {
        "text": _out(capsys, "report", da, "--compare", db),
        "md": _out(capsys, "report", da, "--compare", db, "--format", "md"),
        "tui": _out(capsys, "tui", da, "--once", "--compare", db),
    }
    _out(capsys, "report", da, "--compare", db, "--html", str(page))
    doc = page.read_text(encoding="utf-8")
    part = doc[doc.index('id="diff"') : doc.index('id="figures"')]
    part = re.sub(r"</tr>|</p>|<br>", "\n", part)  # a table row, a paragraph: a line
    out["html"] = html.unescape(re.sub(r"<[^>]+>", " ", part))
    # the report's compare part: after its own sections (the terminal, Markdown) or screen
    out["text"] = out["text"][out["text"].rindex(f"A {Path(da).name}") :]
    out["md"] = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", out["md"][out["md"].rindex("### `") :])
    out["tui"] = out["tui"][out["tui"].index("COMPARE") :].split("\n\n")[0]
    out["md"] = out["md"].replace("**", "")
    return {k: v.replace("│", " ").replace("|", " ") for k, v in out.items()}


def flat(text: str) -> str:
    """Whitespace as one space, a label's colon dropped (the HTML page puts it in a cell)."""
    return " ".join(text.replace(":", " ").split())


def row_line(text: str, metric: str) -> str:
    """The line of the table that names ``metric`` (its long or short name)."""
    names = (f"{metric} (", f"{SHORT_NAMES[metric]} (")
    return next(ln for ln in text.splitlines() if any(n in ln for n in names))


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough that a metric's name is one line (row by row reading)."""
    monkeypatch.setenv("COLUMNS", "200")


def test_different_workloads_read_so_and_carry_no_verdict_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = diff(shipped_runs.summary(BUG), shipped_runs.summary(OTHER))
    assert d.workload.same is False
    shown = [r.metric for r in d.table if r.metric in DEPENDENT and r.change is not None]
    assert len(shown) >= 5
    views = compare_views(BUG, OTHER, tmp_path, capsys)
    for view, text in views.items():
        assert flat(f"workload: {d.workload.text}") in flat(text), (view, text)
        for metric in shown:
            line = row_line(text, metric)
            assert "other workload" in line, (view, line)
            assert not re.search(r"\b(better|worse)\b", line), (view, line)
        # a row that is the code's, not the load's, keeps its verdict; the critical findings'
        # count does not (an S collapse, one of them, follows the batch)
        assert re.search(r"\bsame\b", row_line(text, "capture fails (failed or predicted)")), view
        assert "other workload" in row_line(text, "critical findings"), view


def test_the_same_workload_keeps_its_verdicts_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = diff(shipped_runs.summary(BUG), shipped_runs.summary(SAME))
    assert d.workload.same is True
    block = diff_block(d)
    judged = {r[0] for r in block.tables[0].rows if r[-1] in ("better", "worse")}
    assert len(judged) >= 3
    for view, text in compare_views(BUG, SAME, tmp_path, capsys).items():
        assert flat(f"workload: {d.workload.text}") in flat(text), view
        assert "other workload" not in text, view
        line = row_line(text, "median step time")
        assert re.search(r"\bbetter\b", line), (view, line)


def test_an_unknown_workload_reads_so_and_carries_no_verdict_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two traces of the gluon kernel whose workload is not known to be the same (neither names
    its device; only the fix's stage-2 grids show its heads): each view prints the one line that
    names the unstated parts, and no workload-dependent row reads better or worse."""
    a, b = "aiter-gluon_v0119_bug", "aiter-gluon_v0119_fix"
    d = diff(shipped_runs.summary(a), shipped_runs.summary(b))
    assert d.workload.same is None
    shown = [r.metric for r in d.table if r.metric in DEPENDENT and r.change is not None]
    assert len(shown) >= 4
    for view, text in compare_views(a, b, tmp_path, capsys).items():
        assert flat(f"workload: {d.workload.text}") in flat(text), (view, text)
        for metric in shown:
            line = row_line(text, metric)
            assert "not judged" in line, (view, line)
            assert not re.search(r"\b(better|worse)\b", line), (view, line)


def test_the_dashboard_names_a_copied_run_by_its_folder_as_the_report_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copied run's run.json keeps the name it was recorded under; the report, ``runs`` and
    exports name it by its folder, and so does the dashboard's header."""
    import shutil

    from tests import shipped_demo

    src = shipped_demo.run("fix-padding-active-rows-c16")
    dst = tmp_path / "copied-run"
    shutil.copytree(src, dst)
    tui = _out(capsys, "tui", str(dst), "--once")
    report = _out(capsys, "report", str(dst), "--json")
    assert json.loads(report)["run"] == "copied-run"
    assert tui.splitlines()[0].startswith("copied-run  |"), tui.splitlines()[0]

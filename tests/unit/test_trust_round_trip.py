"""A trace's trust survives every export that imports back, and an unknown trust is never "OK".

On a two-rank trace built here (rank 1 lost three kernels of one graph replay, rank 0 complete),
each rule below failed with its fix undone:

1. an mlaprof rocpd export imported back lost every rank's trace checks (the export carried the
   steps, layers and analysis tables, not ``trace_checks``): the trust read "unknown" with no
   reason, and rank 1's loss was gone; a CSV export re-imports with the checks recomputed;
2. an unknown trust said no reason ("verdict unknown; reasons none") and the fleet's ranks read
   "trust by rank: none": it says what is missing, each rank "unknown";
3. the terminal printed "OK no findings: S and the kernel variants in this trace look as
   expected" over that unknown trust: the line under an empty findings list is the summary's
   ``findings_verdict`` (mlaprof.analysis.findings_verdict), "unknown" with what is missing,
   and every view (terminal, Markdown, HTML, ``tui``, ``report --json``) prints that field.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rich.console import Console

import mlaprof
from mlaprof.cli import main
from mlaprof.exporters.csv_export import export_csv
from mlaprof.exporters.rocpd_export import export_rocpd
from mlaprof.figures.html_report import render_html
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.reporters.markdown import render_markdown
from mlaprof.reporters.rows import HEADING
from mlaprof.reporters.terminal import print_report
from mlaprof.tui.once import read_view
from mlaprof.tui.text import render_text
from tests import step_shapes as shapes
from tests.trace_io_helpers import db_rows

if TYPE_CHECKING:
    from mlaprof.analysis.run_summary import RunSummary

LOST = 3  # kernels rank 1's second replay lost


def _rank(pid: int, agent: int, lossy: bool) -> shapes.Process:
    """Four steps replayed in FULL graphs; ``lossy``: the second replay lost :data:`LOST`
    kernels (a replay inside the window: the edges' partial steps are no loss)."""
    p = shapes.Process(pid=pid, agent=agent)
    for _ in range(4):
        shapes.step_full(p, rows=8, s=8, qlen=4, layers=4)
    if lossy:
        second = sorted({k.corr for k in p.kernels if k.graph_exec})[1]
        mine = [i for i, k in enumerate(p.kernels) if k.corr == second]
        for i in sorted(mine[5 : 5 + LOST], reverse=True):
            del p.kernels[i]
    return p


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The trace as rocprofv3 CSVs and as rocprofv3's rocpd databases, each imported; the CSV
    import exported to rocpd and to CSV; the folders of each."""
    tmp = tmp_path_factory.mktemp("trust")
    shape = shapes.Shape("fl", [_rank(5001, 2, False), _rank(5002, 3, True)], {})
    out: dict[str, Any] = {"tmp": tmp, "traces": tmp / "traces"}
    for fmt in ("csv", "rocpd-3.0.1"):
        folder = shapes.write(shape, fmt, tmp / fmt)
        out[fmt], _ = import_rocprof(folder, out["traces"], fmt)
    with mlaprof.load(out["csv"]) as run:
        export_rocpd(run, tmp / "exp-rocpd")
        export_csv(run, tmp / "exp-csv")
    return out


def _summary(run_dir: Path) -> RunSummary:
    with mlaprof.load(run_dir) as run:
        return mlaprof.build_summary(run)


def _trust(s: RunSummary) -> tuple[str, dict[int, str], list[str]]:
    assert s.trace is not None
    titles = sorted(f.title for f in s.findings if f.kind == "trust")
    return s.trace.trust.verdict, dict(s.trace.trust_by_rank), titles


def test_the_trace_is_unreliable_on_rank_1_alone(made: dict[str, Any]) -> None:
    # a plain rocpd import (rocprofv3's own schema, tests/conformance) computes the checks from
    # the kernels, as the CSV import does
    for fmt in ("csv", "rocpd-3.0.1"):
        verdict, by_rank, titles = _trust(_summary(made[fmt]))
        assert (verdict, by_rank) == ("unreliable", {0: "reliable", 1: "unreliable"}), fmt
        assert len(titles) == 1 and "rank 1 of 2" in titles[0], fmt
        for rank in (0, 1):
            assert db_rows(made[fmt], "trace_checks", rank), (fmt, rank)


def test_rocpd_export_imports_back_with_each_ranks_checks(made: dict[str, Any]) -> None:
    back, summary = import_rocprof(made["tmp"] / "exp-rocpd", made["traces"], "back-rocpd")
    for rank in (0, 1):  # each rank's own rows, as the import stored them
        got = db_rows(back, "trace_checks", rank)
        assert got and got == db_rows(made["csv"], "trace_checks", rank), rank
    assert _trust(_summary(back)) == _trust(_summary(made["csv"]))
    assert any("trace checks" in n for n in summary.notes), summary.notes


def test_csv_export_imports_back_with_the_same_trust(made: dict[str, Any]) -> None:
    back, _ = import_rocprof(made["tmp"] / "exp-csv", made["traces"], "back-csv")
    assert _trust(_summary(back)) == _trust(_summary(made["csv"]))


def _own(text: str) -> str:
    """A view's own lines: before the sections every view lays out from the rows layer (which
    show the summary's every field, this one's too)."""
    return " ".join(re.split(re.escape(HEADING), text, flags=re.I)[0].split())


def _without_checks(made: dict[str, Any], name: str) -> Path:
    """The rocpd export with its trace checks taken out (an export written before it carried
    them), imported."""
    src = made["tmp"] / "exp-rocpd"
    dst = made["tmp"] / f"{name}-in"
    for db in sorted(src.rglob("*.db")):
        to = dst / db.relative_to(src)
        to.parent.mkdir(parents=True, exist_ok=True)
        to.write_bytes(db.read_bytes())
        con = sqlite3.connect(to)
        # the view's table: rocpd_arg_<uuid> (the schema's views are read-only)
        (table,) = con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd_arg_%'"
        ).fetchone()
        con.execute(f'DELETE FROM "{table}" WHERE name = ?', ("trace_checks",))
        con.commit()
        con.close()
    back, summary = import_rocprof(dst, made["traces"], name)
    assert any("carries no trace checks" in n for n in summary.notes), summary.notes
    return back


def _views(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The terminal report, --json, Markdown, tui --once and the HTML report's text of a run."""
    out = {}
    for view, args in (("terminal", []), ("json", ["--json"]), ("markdown", ["--format", "md"])):
        assert main(["report", str(run_dir), "--no-cache", *args]) == 0, view
        out[view] = capsys.readouterr().out
    assert main(["tui", str(run_dir), "--once"]) == 0
    out["tui"] = capsys.readouterr().out
    page = html.unescape(render_html(_summary(run_dir)))
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)  # plotly.js, CSS
    out["html"] = " ".join(re.sub(r"<[^>]+>", " ", page).split())
    return out


def test_unknown_trust_says_why_and_no_view_says_ok(
    made: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _without_checks(made, "no-checks")
    s = _summary(run_dir)
    assert s.trace is not None and s.findings == []
    trust = s.trace.trust
    assert trust.verdict == "unknown" and trust.reliable is None
    (why,) = trust.reasons  # what is missing, never "reasons none"
    assert "no trace checks" in why and "export" in why
    assert s.trace.trust_by_rank == {0: "unknown", 1: "unknown"}
    fv = s.findings_verdict
    assert fv.verdict == "unknown" and fv.line is not None and why in fv.line
    for name, text in _views(run_dir, capsys).items():
        flat = " ".join(text.split())
        assert not re.search(r"\bOK\b", flat), name
        assert "look as expected" not in flat and "no findings:" not in flat.lower(), name
        # said where the findings are, not only in the sections below them
        assert "no trace checks" in (flat if name == "json" else _own(text)), name
        if name != "json":
            own = _own(text).replace("*", "")  # Markdown's bold label
            assert "UNKNOWN no findings, but not everything was checked" in own, name
    doc = json.loads(_views(run_dir, capsys)["json"])
    assert doc["findings_verdict"]["verdict"] == "unknown"
    # the dashboard draws the line as a success only where the analysis says OK
    from mlaprof.tui.text import empty_findings_ok

    view, _ = read_view(run_dir)
    assert view.summary is not None and not empty_findings_ok(view)
    said_ok = dataclasses.replace(fv, verdict="ok")
    assert empty_findings_ok(
        dataclasses.replace(view, summary=dataclasses.replace(s, findings_verdict=said_ok))
    )


def test_every_view_prints_the_summarys_line(
    made: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The line under an empty findings list is the summary's field, in every view: a line
    given to the summary is the line each view prints (no view words its own)."""
    run_dir = _without_checks(made, "said")
    with mlaprof.load(run_dir) as run:
        s = mlaprof.build_summary(run)
    mark = "SENTINEL-LINE the analysis wrote"
    s = dataclasses.replace(
        s, findings_verdict=dataclasses.replace(s.findings_verdict, verdict="ok", line=mark)
    )
    console = Console(file=io.StringIO(), width=200)
    print_report(s, console, sections=False)
    texts = {
        "terminal": console.file.getvalue(),  # type: ignore[attr-defined]
        "markdown": render_markdown(s),
        "html": html.unescape(render_html(s)),
    }
    view, _ = read_view(run_dir)
    texts["tui"] = render_text(dataclasses.replace(view, summary=s))
    for name, text in texts.items():
        assert mark in _own(text), name
        assert "look as expected" not in text and "as deserved" not in text, name


def test_a_complete_trace_reads_ok_and_a_log_unknown(tmp_path: Path) -> None:
    """A complete trace reads "OK" on what it judged (its S under a known rule, its capture
    and syncs, its trust), saying beside it that its padding, which no trace records, was not
    judged. A log holds no split metadata, so nothing found there reads "UNKNOWN", saying so."""
    from mlaprof.analysis.findings_verdict import NO_SPLIT_METADATA, TRACE_AS_EXPECTED
    from mlaprof.importers.vllm_log import import_vllm_log

    folder = shapes.write_csv(shapes.Shape("one", [_rank(5001, 2, False)], {}), tmp_path / "in")
    one, _ = import_rocprof(folder, tmp_path / "t", "one")
    s = _summary(one)
    assert s.findings == [] and s.trace is not None and s.trace.trust.verdict == "reliable"
    fv = s.findings_verdict
    assert (fv.verdict, fv.label) == ("ok", "OK")
    assert fv.line == f"no findings: {TRACE_AS_EXPECTED}; not judged: padding (not recorded)"
    log = Path(__file__).resolve().parents[1] / "data" / "vllm" / "cpu_ngram_serve.log"
    run_dir, _ = import_vllm_log(log, tmp_path / "t", "log")
    s = _summary(run_dir)
    fv = s.findings_verdict
    assert s.findings == [] and (fv.verdict, fv.label) == ("unknown", "UNKNOWN")
    assert fv.line is not None and NO_SPLIT_METADATA in fv.line


def test_a_document_without_the_verdict_reads_it_from_its_sections(made: dict[str, Any]) -> None:
    """A ``report --json`` document written before the field: read back, the verdict is made
    from its own findings, splits, trace and shadow, as the build makes it."""
    from mlaprof.analysis.run_summary import RunSummary

    for run_dir in (made["csv"], _without_checks(made, "doc")):
        s = _summary(run_dir)
        doc = s.to_json()
        assert doc.pop("findings_verdict") is not None
        assert RunSummary.from_json(doc).findings_verdict == s.findings_verdict


def test_no_findings_over_an_unknown_capture_is_no_ok() -> None:
    """ "OK: the verify path captures and splits as deserved" rests on a capture verdict: a run
    that watched no step for syncs and captured nothing (its capture unknown) reads UNKNOWN,
    saying why; the same splits over a measured capture read OK."""
    from mlaprof.analysis.capture_status import CaptureStatus
    from mlaprof.analysis.findings_verdict import SPLITS_AS_DESERVED, findings_verdict
    from tests import shipped_runs

    s = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    assert s.splits and s.capture.status == CaptureStatus.CAPTURED
    fv = findings_verdict([], s.splits, s.trace, s.shadow, s.capture, s.padding, s.sync_counts)
    assert fv.verdict == "ok" and fv.line == f"no findings: {SPLITS_AS_DESERVED}"
    unknown = dataclasses.replace(s.capture, status=CaptureStatus.UNKNOWN, why="no step watched")
    fv = findings_verdict([], s.splits, s.trace, s.shadow, unknown, s.padding, s.sync_counts)
    assert (fv.verdict, fv.label) == ("unknown", "UNKNOWN")
    assert (
        fv.line is not None and "capture not judged (verdict unknown: no step watched)" in fv.line
    )

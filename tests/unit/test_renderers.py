"""The text views are renderers of the typed summary: they import nothing from the store, the
numbers and verdicts they print are the summary's, and ``report`` builds each run's summary
exactly once however many views it is asked for."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from mlaprof.analysis import run_summary as rs
from mlaprof.analysis.diff import diff, fmt_change, fmt_value
from mlaprof.cli import main
from mlaprof.reporters.diff_rows import diff_block
from mlaprof.reporters.markdown import cell
from mlaprof.reporters.renderer import JsonRenderer, Renderer, document_text, renderer
from mlaprof.reporters.rows import front_tables, summary_blocks
from mlaprof.reporters.terminal import TerminalRenderer
from tests import shipped_demo, shipped_runs
from tests.summary_corpus import NAMES

ROOT = Path(__file__).resolve().parents[2]
RENDERERS = ("terminal.py", "markdown.py", "renderer.py")
DEMO = shipped_demo.folder()
BUG, FIX = DEMO / "bug-padding-collapses-splits-c16", DEMO / "fix-padding-active-rows-c16"
# what a renderer may not import: the store, or anything that builds a summary or evidence
FORBIDDEN = ("mlaprof.store", "mlaprof.analysis.evidence", "mlaprof.importers")
FORBIDDEN_NAMES = {"summary", "build_summary", "collect", "load", "Run"}
WORKER_GROUP = "shipped-runs"  # one worker builds each shipped run's summary once


def imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of every import in ``source``, TYPE_CHECKING blocks and functions too."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, "") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out += [(node.module or "", a.name) for a in node.names]
    return out


def store_imports(source: str) -> list[tuple[str, str]]:
    return [
        (m, n)
        for m, n in imports(source)
        if m.startswith(FORBIDDEN) or (m.startswith("mlaprof") and n in FORBIDDEN_NAMES)
    ]


@pytest.mark.parametrize("name", RENDERERS)
def test_a_renderer_imports_nothing_from_the_store(name: str) -> None:
    src = (ROOT / "mlaprof" / "reporters" / name).read_text()
    assert store_imports(src) == []
    assert ".query(" not in src and ".sql(" not in src  # no SQL through a handed-in object


def test_the_import_check_sees_a_store_import_anywhere() -> None:
    src = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mlaprof.store.reader import"
        " Run\ndef f():\n    import mlaprof.store\n    from mlaprof.analysis import summary\n"
    )
    assert store_imports(src) == [
        ("mlaprof.store.reader", "Run"),
        ("mlaprof.store", ""),
        ("mlaprof.analysis", "summary"),
    ]


@pytest.fixture(scope="module")
def summaries() -> dict[str, rs.RunSummary]:
    return {n: shipped_runs.summary(n) for n in NAMES}


def _plain(s: rs.RunSummary, d: object = None) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    return TerminalRenderer(console, verbose=True).render(s, d)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", NAMES)
def test_the_terminal_and_markdown_print_the_summarys_numbers(
    name: str, summaries: dict[str, rs.RunSummary]
) -> None:
    s = summaries[name]
    text, md = _plain(s), renderer("md").render(s)
    assert text.startswith(s.run)
    for f in s.findings:
        assert f.title in text and cell(f.title) in md
    log = bool(s.engine_starts) and not s.scenario.recorded  # prints its starts instead
    for h in s.headline:
        assert f"| {cell(h.label)} | {cell(h.value)} |" in md
        if not log and (s.trace is None or h.label == "median step"):
            assert f"{h.label}: {h.value}" in text
    if log:
        c = s.capture
        assert f"{c.mode} -> {c.status} (runs {c.effective_mode})" in text
    if s.trace is None and not s.engine_starts:
        assert f"syncs in region: {s.sync_counts.text}" in text
    assert s.padding.text in text or bool(s.engine_starts)
    rows = {ln.split()[0]: ln.split() for ln in text.splitlines() if ln.strip()}
    for r in s.splits:
        if r.used is not None and not r.on_device:
            cells = rows[r.policy]  # the policy's row: S, all/act, deserved, frozen
            assert str(r.used) in cells and str(r.deserved) in cells
    for p in s.trace.paths if s.trace else []:
        assert any(p.path in ln and str(p.S) in ln for ln in text.splitlines())
    # the rows layer's front tables (a log's starts, a trace's paths, the ranks): each row whole
    front = front_tables(summary_blocks(s))
    assert bool(s.engine_starts) <= any(t.key == "engine_starts" for t in front)
    for t in front:
        for row in t.rows:
            assert any(all(c in ln for c in row) for ln in text.splitlines()), (t.key, row)
    if s.fleet.ranks > 1:
        assert s.fleet.text in text and f"**{cell(s.fleet.text)}**" in md


def test_red_cells_are_the_summarys_collapsed_rows(summaries: dict[str, rs.RunSummary]) -> None:
    """The terminal's red S is SplitStep.collapsed (the analysis' one collapse rule), nothing
    of its own: bold red exactly on the collapsed rows."""
    seen = 0
    for s in summaries.values():
        console = Console(
            file=io.StringIO(), width=400, force_terminal=True, color_system="standard"
        )
        text = TerminalRenderer(console).render(s)
        for line in text.splitlines():
            row = next((r for r in s.splits if line.strip().startswith(r.policy + " ")), None)
            if row is None or row.used is None or row.on_device:
                continue
            red = f"\x1b[1;31m{row.used}\x1b[0m" in line
            assert red == row.collapsed, (s.run, row.policy, line)
            seen += row.collapsed
    assert seen >= 2  # the bug runs hold collapsed rows


def test_the_diff_renders_the_diffs_numbers(summaries: dict[str, rs.RunSummary]) -> None:
    a, b = summaries["demo-" + BUG.name], summaries["demo-" + FIX.name]
    d = diff(a, b)
    text, md = _plain(a, d), renderer("md").render(a, d)
    assert d.table
    # each distinct source one more star, in the rows' order (the diff block's legend)
    sources = list(dict.fromkeys(r.provenance for r in d.table if r.provenance))
    assert len(sources) > 1  # the timing's, the S used's (recorded), the model's, the memory's
    for r in d.table:
        want = [fmt_value(r.a), fmt_value(r.b), fmt_change(r), str(r.verdict)]
        assert any(r.metric in ln and all(w in ln for w in want) for ln in text.splitlines())
        mark = "*" * (sources.index(r.provenance) + 1) if r.provenance else ""
        name = f"{r.metric} ({r.unit})" + mark  # the source's mark
        assert f"| {cell(name)} | {' | '.join(map(cell, want))} |" in md
    # the diff block's rows (the workload line, what the mark stands for) in both views
    for row in diff_block(d).rows:
        assert f"- **{cell(row.label)}**: {cell(row.text)}" in md
        assert f"{row.label}: {row.text}" in " ".join(text.split())


def test_every_format_is_a_renderer_of_the_summary(summaries: dict[str, rs.RunSummary]) -> None:
    s = summaries["demo-" + BUG.name]
    for fmt in ("text", "json", "md"):
        r: Renderer = renderer(fmt)
        assert isinstance(r.render(s), str)
    assert json.loads(JsonRenderer().render(s)) == json.loads(json.dumps(s.to_json(), default=str))


def test_the_json_document_holds_one_top_level_key_per_line() -> None:
    """Written by the C encoder a value at a time: the same document, its sections one a line."""
    doc = {"run": "a\u00e9", "n": {"1": [1.5, None, True]}, "when": Path("x/y"), "empty": {}}
    text = document_text(doc)
    assert json.loads(text) == json.loads(json.dumps(doc, indent=2, default=str))
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and len(lines) == len(doc) + 2
    assert [json.loads("{" + ln.strip().rstrip(",") + "}") for ln in lines[1:-1]] == [
        json.loads(json.dumps({k: v}, default=str)) for k, v in doc.items()
    ]
    assert document_text({}) == "{}\n" and text.endswith("}\n") and "\\u00e9" in text


def test_report_builds_each_summary_exactly_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report A --compare B --html F --json``: the JSON, the diff and the HTML report (with
    its own summary and diff calls) all get the one summary per run."""
    built: list[str] = []
    real = rs._build

    def counting(run, shadow, *series):  # noqa: ANN001, ANN002, ANN202
        built.append(run.name)
        return real(run, shadow, *series)

    monkeypatch.setattr(rs, "_build", counting)
    html = tmp_path / "r.html"
    assert main(["report", str(BUG), "--compare", str(FIX), "--html", str(html), "--json"]) == 0
    assert sorted(built) == sorted([BUG.name, FIX.name])
    out = capsys.readouterr().out
    doc = json.loads(out[out.index("{") :])
    assert doc["compare"]["before"] == BUG.name and html.is_file()
    built.clear()
    assert main(["report", str(BUG), "--compare", str(FIX)]) == 0  # the terminal and its diff
    assert sorted(built) == sorted([BUG.name, FIX.name])


def test_the_terminal_headline_holds_every_headline_row(
    summaries: dict[str, rs.RunSummary],
) -> None:
    """Every headline row the Markdown, HTML and TUI show is in the terminal's headline too (a
    trace's "capture memory ... unknown" row was dropped there); the capture row is said on the
    terminal's capture line."""
    seen = 0
    for s in summaries.values():
        flat = " ".join(_plain(s).split())
        for h in s.headline:
            if h.label == "capture":
                continue
            assert " ".join(f"{h.label}: {h.value}".split()) in flat, (s.run, h.label)
            seen += 1
    assert seen > 20

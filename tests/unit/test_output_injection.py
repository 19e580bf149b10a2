"""Output that cannot be injected: a kernel or run name is data in every medium. Markdown meant
for a PR comment (``report --format md``) gets no HTML, link, image or broken code span from it;
the terminal (``tui TRACES --once``'s run list) gets no control sequence from a folder name."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from mlaprof.analysis.findings import Finding
from mlaprof.cli import main
from mlaprof.textsafe import md_code, md_text
from tests import shipped_demo, shipped_runs

ROOT = Path(__file__).resolve().parents[2]
DEMO = shipped_demo.run("fix-native-kernel-full-graph")  # a copy: tests never touch traces/
# what a hostile (or merely unlucky) kernel name may hold
PAYLOAD = (
    "k<script>alert(1)</script><iframe src=//e.com></iframe></code></pre>"
    "![img](http://e.com/x.png) [a](https://e.com) www.e.com <b>*bold*</b> _i_ ~~s~~ a|b `c` &amp;"
)
# GitHub's renderer: CommonMark, tables, strike-through, bare URLs as links
RENDER = MarkdownIt("gfm-like", {"linkify": True}).enable("table")


def _html(text: str) -> str:
    return RENDER.render(text)


def _no_markup(html: str) -> None:
    # (the report's own bold and italics are allowed; the payload's are checked as text below)
    for tag in ("<script", "<iframe", "<img", "<a ", "<b>", "<s>", "<del>"):
        assert tag not in html, (tag, html)
    assert "</pre>" not in html.replace("</code></pre>\n", "")  # no fence closed early


def test_md_text_is_text_in_github_markdown() -> None:
    html = _html(md_text(PAYLOAD))
    _no_markup(html)
    assert html.count("<p>") == 1  # one paragraph: no line break, no block opened
    assert "<em>" not in html and "<strong>" not in html and "<code>" not in html
    # every character is still shown, as text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "http://e.com/x.png" in html


@pytest.mark.parametrize("name", ["a`b", "`lead", "trail`", "x```y`z", "r|1", PAYLOAD])
def test_a_code_span_holds_any_name_whole(name: str) -> None:
    html = _html(f"## run {md_code(name)}")
    _no_markup(html)
    inner = html.split("<code>", 1)[1].split("</code>", 1)[0]
    import html as h

    assert h.unescape(inner) == name
    cell = _html(f"| run |\n|---|\n| {md_code(name, table=True)} |")
    assert h.unescape(cell.split("<code>", 1)[1].split("</code>", 1)[0]) == name


def test_report_md_renders_trace_strings_as_text() -> None:
    real = shipped_runs.summary("demo-fix-native-kernel-full-graph")
    bad = Finding(kind="x", severity="warning", title=PAYLOAD, evidence=PAYLOAD, fix=PAYLOAD,
                  location=PAYLOAD)  # fmt: skip
    headline = [replace(h, value=PAYLOAD) for h in real.headline]
    from mlaprof.reporters.markdown import render_markdown

    doc = render_markdown(replace(real, run="run`<script>", findings=[bad], headline=headline))
    html = _html(doc)
    _no_markup(html)
    assert "<h2>mlaprof: <code>run`&lt;script&gt;</code></h2>" in html
    assert html.count("*bold*") >= 4 and html.count(" _i_ ~~s~~ a|b `c`") >= 4


def test_a_run_folder_named_with_a_backtick_keeps_its_heading(tmp_path: Path, capsys) -> None:
    run = tmp_path / "t" / "a`b<img src=x>"
    shutil.copytree(DEMO, run)
    assert main(["report", str(run), "--format", "md"]) == 0
    html = _html(capsys.readouterr().out)
    _no_markup(html)
    assert "<h2>mlaprof: <code>a`b&lt;img src=x&gt;</code></h2>" in html


def test_tui_once_run_list_prints_no_control_sequence(tmp_path: Path, capsys) -> None:
    traces = tmp_path / "traces"
    shutil.copytree(DEMO, traces / "evil\x1b]0;owned\x07\x1b[2J")
    assert main(["tui", str(traces), "--once"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07\\x1b[2J" in out


def test_import_and_export_print_file_names_as_data(tmp_path: Path, capsys) -> None:
    src = ROOT / "tests" / "data" / "rocprof" / "rocprofiler-sdk-docs__kernel_trace.csv"
    evil = tmp_path / "in\x1b]0;t\x07" / "x_kernel_trace.csv"
    evil.parent.mkdir()
    shutil.copy(src, evil)
    traces = tmp_path / "traces"
    assert main(["import", "rocprof", str(evil), "--traces", str(traces), "--name", "r"]) == 0
    out_file = tmp_path / "out\x1b[2J" / "x.json"
    assert main(["export", str(traces / "r"), "--format", "perfetto", "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "out\\x1b[2J" in out

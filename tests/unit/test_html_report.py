"""The HTML report: one offline file, findings on top, figures below (rendered by Chromium in
tests/e2e/test_html_chromium.py)."""

from __future__ import annotations

import re
import sys

import pytest

import mlaprof
from mlaprof.analysis import analyze
from mlaprof.errors import MissingExtraError, MlaprofError
from mlaprof.figures import ENGINE_FIGURES, RUN_FIGURES
from mlaprof.figures import png as png_mod
from mlaprof.figures.html_report import write_html_report
from tests.conftest import summary_of

# the scenario runs drawn here are no recorded vLLM engine: its figures are left out


SCENARIO_FIGURES = [f for f in RUN_FIGURES if f[0] not in ENGINE_FIGURES]


def test_report_is_one_offline_file_with_plotly_inline(html_report):
    bug, _, out = html_report
    assert out.is_file() and out.name == "report.html"
    text = out.read_text(encoding="utf-8")
    srcs = re.findall(r"<script[^>]*\bsrc\s*=\s*[\"']?([^\"' >]+)", text, re.I)
    assert not [s for s in srcs if s.startswith(("http://", "https://", "//"))]
    assert not re.search(r"<link[^>]+href=[\"']?https?://", text, re.I)
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    assert text.count(js[:2000]) == 1  # inlined exactly once
    # one figure per report figure plus the diff, each drawn by the inline library
    assert text.count("Plotly.newPlot(") == len(SCENARIO_FIGURES) + 1
    for stem, _ in SCENARIO_FIGURES:
        assert f'id="fig-{stem}"' in text


def test_findings_on_top_and_diff_table(html_report):
    bug, fix, out = html_report
    text = out.read_text(encoding="utf-8")
    with mlaprof.load(bug) as run:
        findings = analyze(run)
    assert findings, "the bug run must produce findings"
    first_fig = text.index("Plotly.newPlot(")
    assert text.index(f"Findings ({len(findings)})") < first_fig
    import html

    for f in findings:
        assert html.escape(f.title) in text[:first_fig]
    assert "sev-critical" in text[:first_fig]
    assert "A = <b>bug</b> (this run, before), B = <b>fix</b> (after)" in text
    with mlaprof.load(bug) as run:
        route = run.meta["scenario"] and mlaprof.analysis.summary(run)["route"]
    assert f"<td>vLLM route</td><td>{route['path']} (" in text.replace("<th>", "<td>").replace(
        "</th>", "</td>"
    )
    # the diff block's row (mlaprof.reporters.diff_rows): metric (unit), A, B, change, verdict
    assert re.search(
        r"<td>sync / allocation sites in the region \(count\)</td><td>2</td><td>0</td>"
        r"<td>-100%</td><td class='better'>better</td>",
        text,
    )


def test_bad_output_path(html_report, tmp_path):
    bug, _, _ = html_report
    with pytest.raises(MlaprofError, match="is a folder"):
        write_html_report(summary_of(bug), tmp_path)


def test_the_page_and_the_pngs_render_a_summary_never_a_run(html_report, tmp_path):
    """A view renders the summary it is given: a run folder or a Run is refused with one line
    (no view builds a summary of its own, so no cache stands in for passing it)."""
    bug, _, _ = html_report
    with pytest.raises(MlaprofError, match=r"renders a run summary: pass build_summary\(run\)"):
        write_html_report(bug, tmp_path / "r.html")
    with mlaprof.load(bug) as run, pytest.raises(MlaprofError, match="not a Run"):
        write_html_report(run, tmp_path / "r.html")
    from mlaprof.figures import run_figures

    with pytest.raises(MlaprofError, match="renders a run summary"):
        run_figures(bug)
    assert not (tmp_path / "r.html").exists()


def test_pngs_without_a_browser_say_how_to_get_one(html_report, tmp_path, monkeypatch):
    bug, _, _ = html_report
    monkeypatch.setattr(png_mod, "find_chrome", lambda: None)
    if "kaleido" not in sys.modules:
        monkeypatch.setitem(sys.modules, "kaleido", type(sys)("kaleido"))
    with pytest.raises(MlaprofError, match=r"apt-get install chromium.*pip install -e '\.\[png\]'"):
        png_mod.write_pngs(summary_of(bug), tmp_path / "png")
    assert not (tmp_path / "png").exists()


def test_pngs_without_kaleido_name_the_extra(html_report, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "kaleido", None)
    with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[png\]'"):
        png_mod.write_pngs(summary_of(html_report[0]), tmp_path / "png")


def test_browser_path_env_is_honoured(monkeypatch, tmp_path):
    fake = tmp_path / "chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BROWSER_PATH", str(fake))
    assert png_mod.find_chrome() == str(fake)
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "missing"))
    assert png_mod.find_chrome() is None


@pytest.mark.parametrize("misses", [1, 2])
def test_a_png_kaleido_did_not_write_is_drawn_again_then_named(
    html_report, tmp_path, monkeypatch, misses: int
) -> None:
    """kaleido may return without writing a file and without an error: what is missing is drawn
    once more, and named in an error if it is still missing (never a path that is not there)."""
    import plotly.io as pio

    bug, _, _ = html_report
    monkeypatch.setattr(png_mod, "find_chrome", lambda: "/usr/bin/true")
    if "kaleido" not in sys.modules:
        monkeypatch.setitem(sys.modules, "kaleido", type(sys)("kaleido"))
    calls: list[list[str]] = []

    def write_images(figs, paths, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append([p.name for p in paths])
        for p in paths:
            if not (p.name == "padding.png" and len(calls) <= misses):
                p.write_bytes(b"\\x89PNG")

    monkeypatch.setattr(pio, "write_images", write_images)
    if misses == 1:
        paths = png_mod.write_pngs(
            summary_of(bug), tmp_path / "png", only=["padding", "splits_by_step"]
        )
        assert all(p.stat().st_size for p in paths)
        assert calls == [["splits_by_step.png", "padding.png"], ["padding.png"]]
    else:
        with pytest.raises(MlaprofError, match=r"wrote no padding\.png"):
            png_mod.write_pngs(
                summary_of(bug), tmp_path / "png", only=["padding", "splits_by_step"]
            )
        assert len(calls) == 2


def _meta_rows(html: str) -> dict[str, str]:
    table = re.search(r'<table class="meta">(.*?)</table>', html, re.S).group(1)
    return dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table))


def test_the_run_table_counts_ranks_and_keeps_an_imports_facts_apart(html_report, tmp_path):
    """The run table read "ranks 0" for one rank, and an imported trace showed the importing
    machine's torch and triton as if the trace had run on them."""
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conftest import ROOT

    bug, _, out = html_report
    rows = _meta_rows(out.read_text())
    assert rows["ranks"] == "1 (rank 0)" and "torch" in rows["versions"] and "created" in rows
    run = import_rocprof(ROOT / "tests/data/aiter/fleet_dp2_tp4", tmp_path / "t", "fleet")[0]
    page = write_html_report(summary_of(run), tmp_path / "fleet.html")
    rows = _meta_rows(page.read_text())
    assert rows["ranks"] == "8 (ranks 0-7)"
    assert "versions" not in rows and "git" not in rows and "imported" in rows
    assert rows["imported with"].endswith(
        "on the importing machine, not the trace&#x27;s libraries"
    )
    assert "torch" not in rows["imported with"] and "mlaprof" in rows["imported with"]

"""The HTML report in a real headless Chromium: it renders offline, and kaleido writes the figures
as PNG."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mlaprof.figures import png as png_mod
from mlaprof.figures.png import CHROMIUM, render_dom
from tests.conftest import summary_of
from tests.unit.test_html_report import SCENARIO_FIGURES


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)"
)
def test_report_renders_offline_in_headless_chromium(html_report, tmp_path):
    _, _, out = html_report
    res = render_dom(out, tmp_path / "profile", timeout=120)
    dom = res.stdout
    assert res.returncode == 0, res.stderr[-2000:]
    n_figs = len(SCENARIO_FIGURES) + 1
    # plotly.js ran: every figure div got its plot container and SVG layers with drawn marks
    assert dom.count('class="plot-container plotly"') == n_figs
    assert dom.count('class="main-svg"') >= 2 * n_figs
    for stem, _ in SCENARIO_FIGURES:
        block = dom.split(f'id="fig-{stem}"', 1)[1][:200_000]
        assert "main-svg" in block.split('class="fig"', 1)[0], stem
    assert dom.count('class="point"') > 20  # bars and markers were drawn
    assert "KV splits S used vs deserved per step" in dom  # titles are rendered text


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.skipif(png_mod.find_chrome() is None, reason="needs Chrome/Chromium")
def test_write_pngs_with_kaleido(html_report, tmp_path):
    bug, _, _ = html_report
    pytest.importorskip("kaleido")
    paths = png_mod.write_pngs(summary_of(bug), tmp_path / "png", only=["padding"])
    assert paths == [tmp_path / "png" / "padding.png"]
    w, h = _png_size(paths[0])
    assert (w, h) == (png_mod.WIDTH, 460)
    assert paths[0].stat().st_size > 10_000  # a drawn figure, not a blank page

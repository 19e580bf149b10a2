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


@pytest.mark.skipif(png_mod.find_chrome() is None, reason="needs Chrome/Chromium")
def test_the_s_figure_reads_at_a_glance_in_a_screenshot(html_report, tmp_path):
    """The per-policy S figure as Chromium draws it (kaleido): no grey note in the legend's band
    above the plot (a note once sat on the legend), the notes under the axis instead, and a bar
    of S = 1 beside one of S = 4 told apart (on a linear axis to 256 both were a pixel or
    two tall: the finding itself flattened)."""
    import numpy as np
    import pandas as pd

    import mlaprof
    from mlaprof import figures as F
    from tests.png_pixels import grey, near, pixels

    pytest.importorskip("kaleido")
    bug, _, _ = html_report
    with mlaprof.load(bug) as run:
        sp = run.splits
    own = sp[sp["policy"] == "aiter-gluon-v0.1.19"]
    na = own.assign(policy="aiter-gluon-bh64", used=None, deserved=None, frozen=None,
                    note="not runnable: bh64 needs 64 or 128 heads, got 8")  # fmt: skip
    dev = own.assign(policy="aiter-asm-persistent", used=7, frozen=7, deserved=256)
    fig = F.splits_used_vs_deserved({"splits": pd.concat([own, na, dev])}, by="policy")
    path = tmp_path / "s.png"
    fig.write_image(path, width=png_mod.WIDTH, height=fig.layout.height, scale=1)
    img = pixels(path)
    top = fig.layout.margin.t  # the plot starts here; the title and the legend are above it
    band = grey(img[30:top])  # under the title's line, the legend's band
    assert band.sum() < 5, f"{band.sum()} grey note pixels in the legend band"
    assert grey(img[-30:]).sum() > 50  # the device note, under the x axis

    # the run's policy's bars, left to right: S used 1 (red), S deserved 4 (green)
    def first_bar(rgb: tuple[int, int, int]) -> int:
        cols = near(img, rgb, 10).sum(axis=0)
        x = int(np.argmax(cols > 3))
        return int(cols[x : x + 5].max())

    used1, deserved4 = first_bar((214, 39, 40)), first_bar((44, 160, 44))
    assert used1 >= 10 and deserved4 >= 2 * used1, (used1, deserved4)

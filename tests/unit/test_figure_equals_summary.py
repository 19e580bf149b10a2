"""Figure equals summary: on every shipped run and trace (the H200 demo runs, a recorded vLLM
engine run, every trace and log in tests/data, imported here), every report figure is built from
the run's summary, and the numbers it plots are the summary's numbers: step medians per graph
mode and per rank (the timing section), S per layer (the layer table), padding totals (the
padding section, summed over ranks), the worst step's S (the splits section), the engine's
modelled S per step (the shadow section), the kernel launches the run holds."""

from __future__ import annotations

import contextlib
import functools
import statistics
from collections.abc import Iterator

import pytest

import mlaprof
from mlaprof import figures as F
from mlaprof.figures._common import is_empty
from tests import shipped_runs

IDS = shipped_runs.NAMES
WORKER_GROUP = "shipped-runs"  # one worker builds each shipped run's summary once


@functools.cache
def summary(ident: str):
    """The run's summary (built once per process), and the run closed: nothing below reads it."""
    s = shipped_runs.summary(ident)
    with mlaprof.load(shipped_runs.run_dir(ident)) as run:
        launches = {
            int(r): int(n)
            for r, n in run.query(
                "SELECT rank, COUNT(*) AS n FROM kernels WHERE start_ns IS NOT NULL "
                "AND end_ns IS NOT NULL GROUP BY rank"
            ).itertuples(index=False)
        }
    return s, launches


def _no_read(*a, **k):
    raise AssertionError("the figure or page read the run")


@contextlib.contextmanager
def _summary_only() -> Iterator[None]:
    """A table read or SQL query of any run inside this block is an error."""
    from mlaprof.store.reader import Run

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Run, "table", _no_read)
        mp.setattr(Run, "read_tables", _no_read)
        mp.setattr(Run, "query", _no_read)
        yield


@functools.cache
def figures(ident: str) -> tuple[tuple[str, object], ...]:
    """The run's report figures (:func:`mlaprof.figures.run_figures`), built once per process
    from the summary alone: the tests below only read them."""
    s, _ = summary(ident)
    with _summary_only():
        return tuple(F.run_figures(s))


@functools.cache
def figure(ident: str, build: str, **kw: object):
    """``F.<build>(summary, **kw)``, built once per process from the summary alone."""
    s, _ = summary(ident)
    with _summary_only():
        return getattr(F, build)(s, **kw)


@functools.cache
def page(ident: str) -> str:
    """The run's HTML page, built once per process from the summary alone (the page read the
    run's tables 28 times before)."""
    from mlaprof.figures.html_report import render_html

    s, _ = summary(ident)
    with _summary_only():
        return render_html(s)


def named(fig, prefix: str):
    return [t for t in fig.data if (t.name or "").startswith(prefix)]


def test_the_corpus_holds_every_kind_of_run() -> None:
    kinds = {str(summary(i)[0].kind) for i in IDS}
    assert {"scenario", "engine", "trace", "log"} <= kinds, kinds
    assert any(len(summary(i)[0].ranks) > 1 for i in IDS)  # a fleet, drawn rank by rank


@pytest.mark.parametrize("ident", IDS)
def test_every_figure_draws_the_summarys_numbers(ident: str) -> None:
    s, launches = summary(ident)
    figs = dict(figures(ident))  # the run is closed: the figures read the summary only
    ranks = [r.rank for r in s.series.ranks]
    assert sorted(ranks) == sorted(set(ranks))  # one series per rank, never merged
    single = len(s.ranks) == 1

    # step time per graph mode: the timing section's medians, rank by rank
    per_rank = {r.rank: r.step_median_us for r in s.timing.per_rank}
    for rank in ranks:
        fig = figure(ident, "full_vs_fallback", rank=rank)
        if is_empty(fig):
            assert rank not in per_rank, "steps were timed but the figure draws none"
            continue
        unit = 1e3 if "(ms)" in fig.layout.yaxis.title.text else 1.0
        bar = named(fig, "median step time")[0]
        points = [y * unit for t in named(fig, "one step") for y in t.y]
        assert statistics.median(points) == pytest.approx(per_rank[rank], rel=1e-9)
        if single:
            want = s.timing.by_mode
            assert [y * unit for y in bar.y] == pytest.approx(list(want.values()), rel=1e-9)
            assert len(bar.y) == len(want) and len(points) == s.timing.steps

    # S per layer: the layer table (S used, and the S each layer is judged against)
    for rank in ranks:
        rows = [r for r in s.layers if r.rank == rank]
        fig = figure(ident, "splits_used_vs_deserved", by="layer", rank=rank)
        capped = any(r.S_used is None and r.S_grid_cap is not None for r in rows)
        if not rows or (all(r.S_used is None for r in rows) and not capped):
            assert is_empty(fig)
            continue
        if all(r.S_used is None for r in rows):  # the grid's cap (device S): never an S used
            assert not named(fig, "S used")
            assert list(fig.data[0].y) == [r.S_reference for r in rows]
            continue
        used = named(fig, "S used")[0]
        assert list(used.x) == [r.layer for r in rows]
        assert list(used.y) == [r.S_used for r in rows]
        ref = [t for t in fig.data if t.name != "S used"]
        if all(r.S_reference is None for r in rows):
            assert not ref, "a legend entry without a bar"
        else:
            assert list(ref[0].y) == [r.S_reference for r in rows]

    # padding: each rank's waterfall, summed over ranks, is the padding section
    pad = s.padding
    drawn = {"real_rows": 0.0, "padding_rows": 0.0, "real_tokens": 0.0, "padding_tokens": 0.0}
    drew = False
    for rank in ranks:
        fig = figure(ident, "padding_waterfall", rank=rank)
        if is_empty(fig):
            continue
        drew = True
        falls = {t.name: t for t in fig.data if t.type == "waterfall"}
        for panel, real, padc in (("requests", "real_rows", "padding_rows"),
                                  ("query tokens", "real_tokens", "padding_tokens")):  # fmt: skip
            if panel in falls:
                drawn[real] += falls[panel].y[0]
                drawn[padc] += falls[panel].y[1]
    if pad.steps is None:  # no padding recorded (its counts unknown): no rank draws one
        assert not drew, ident
    else:
        assert drawn == {k: pytest.approx(getattr(pad, k)) for k in drawn}

    # the worst step of the run's own policy: its S used and deserved on the step line
    own = s.scenario.policy
    for row in [r for r in s.splits if r.policy == own and r.used is not None]:
        for rank in row.ranks or [row.rank]:
            fig = figure(ident, "splits_used_vs_deserved", rank=rank)
            # S decided on the device: no host S used is drawn, S deserved is
            drawn_s = (("S deserved", "deserved"),) if row.on_device else (
                ("S used", "used"), ("S deserved", "deserved"))  # fmt: skip
            assert not (row.on_device and named(fig, "S used"))
            for name, key in drawn_s:
                line = next(t for t in fig.data if t.name == name)
                at = dict(zip(line.x, line.y, strict=True))
                assert at[row.step] == getattr(row, key), (rank, name)

    # the engine's modelled S per step: the shadow section's per_step rows
    if s.kind == "engine":
        fig = figs["shadow_splits"]
        steps = [r for r in s.shadow.per_step if r.rank == min(ranks)]
        for name, key in (("S with the padding bug", "s_bug"), ("S with the fix", "s_fix"),
                          ("S frozen", "s_frozen"), ("S deserved", "s_deserved")):  # fmt: skip
            line = named(fig, name)[0]
            assert list(line.x) == [r.step for r in steps]
            assert list(line.y) == [getattr(r, key) for r in steps]
    else:
        assert "shadow_splits" not in figs

    # every kernel launch the run holds is in its rank's kernel-time figure
    for rank in ranks:
        fig = figure(ident, "time_breakdown", rank=rank)
        got = 0 if is_empty(fig) else sum(int(t.split("x")[0].split(", ")[-1])
                                           for t in fig.data[0].text)  # fmt: skip
        assert got == launches.get(rank, 0)


def test_a_figure_that_re_derives_is_caught() -> None:
    """The check above fails for a figure that computes its own number (a mean of the points
    for the median bar), as the timing figure did before it drew the summary."""
    s, _ = summary("demo-bug-legacy-flat-syncs-break-capture")
    fig = F.full_vs_fallback(s)
    bar = named(fig, "median step time")[0]
    points = [y for t in named(fig, "one step") for y in t.y]
    assert statistics.mean(points) != pytest.approx(bar.y[0], rel=1e-9)
    assert bar.y[0] == pytest.approx(s.timing.by_mode["PIECEWISE"], rel=1e-9)  # µs


def _points(t) -> list:
    vals = list(t.x or ()) if getattr(t, "orientation", None) == "h" else list(t.y or ())
    return [v for v in vals if v is not None and v == v]


S_BARS = ("splits_by_policy", "splits_by_capture_size", "splits_by_layer")


@pytest.mark.parametrize("ident", IDS)
def test_no_legend_entry_without_a_point_and_s_1_has_a_bar(ident: str) -> None:
    """A series the run lacks (S deserved of an imported trace) has no legend entry; a bar of
    S = 1 has a height (a log2 axis that starts at 1/2, never at 1: S 1 vs 4 must read apart,
    which a linear axis to 256 flattened) and its label."""
    s, _ = summary(ident)
    for stem, fig in figures(ident):
        for t in fig.data:
            if stem == "padding" and t.type == "bar":
                continue  # the waterfall's colour swatches (waterfalls colour by measure)
            if t.showlegend is not False and t.type != "waterfall":
                assert _points(t), f"{stem}: legend entry {t.name!r} with nothing drawn"
        if stem in S_BARS:
            y = fig.layout.yaxis
            assert y.type == "log" and y.range[0] < 0 and list(y.tickvals)[:3] == [1, 2, 4], stem
            for t in fig.data:
                for y, text in zip(t.y, t.text, strict=True):
                    if y == 1:
                        assert text == "1", stem


TRACES = [i for i in IDS if i.startswith(("aiter-", "rocprof-", "kineto", "vllm_cpu"))]


@pytest.mark.parametrize("ident", TRACES)
def test_the_html_summary_of_an_imported_trace_says_its_s(ident: str) -> None:
    """The HTML page's summary block (above the findings) gives the S of every verify path the
    trace's kernels show, as the summary holds it, or says it is unknown or on the device."""
    s, _ = summary(ident)
    if s.trace is None or not s.trace.paths:
        pytest.skip("no verify path recognised in this trace (its findings say why)")
    html = page(ident)
    block = html[html.index('<h2 id="summary">') : html.index('<h2 id="findings">')]
    for p in s.trace.paths:
        said = "decided on the device" if p.S is None and "device" in str(p.S_source) else None
        want = f"S {p.S} on {p.path}" if p.S is not None else said or f"S unknown on {p.path}"
        assert want in block.replace("&#x27;", "'"), (ident, want)


@pytest.mark.parametrize("ident", ["demo-bug-padding-collapses-splits-c16", "engine-engine_ngram_run",
                                   "aiter-fleet_dp2_tp4"])  # fmt: skip
def test_the_html_page_reads_the_summary_only(ident: str) -> None:
    """Every figure and the page from the summary: a table read or SQL query while the page is
    built is an error (:func:`page` builds every page so, the imported traces' pages above too)."""
    assert page(ident).count("Plotly.newPlot(") == len(figures(ident))


def test_a_dataframe_is_no_run() -> None:
    """A figure takes a Run or the frames of its tables; a DataFrame has a ``query`` method of
    its own and is never read as a Run (the engine's shadow figure of its events frame raised
    "'DataFrame' object has no attribute 'meta'"; a frame's figure says what it cannot draw)."""
    from mlaprof.analysis import series as series_mod
    from mlaprof.figures._common import is_run

    with mlaprof.load(shipped_runs.run_dir("engine-engine_ngram_run")) as run:
        events = run.table("events")
        assert is_run(run) and not is_run(events) and not is_run({"events": events})
        # the series a figure draws ask the same question: a frame holds no stored kernel sums
        assert series_mod._kernels_per_rank(events) == {}
        assert not is_empty(F.shadow_splits(run))
        fig = F.shadow_splits(events)
    assert fig.layout.title.text.startswith("KV splits per engine step")

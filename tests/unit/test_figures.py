"""Figures built from small recorded runs: traces, axes, titles and units reflect the data."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

import mlaprof
from mlaprof import figures as F
from mlaprof.errors import MissingExtraError, MlaprofError
from mlaprof.figures._common import is_empty
from mlaprof.store import create_run
from mlaprof.synthetic.figures import POLICY_NAMES, write_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    bug = mlaprof.load(write_run(d, "bug"))
    fix = mlaprof.load(write_run(d, "fix", fixed=True, fallback_steps=()))
    yield bug, fix
    bug.close()
    fix.close()


def trace(fig, name: str):
    hits = [t for t in fig.data if t.name == name]
    assert hits, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return hits[0]


def test_every_report_figure_has_title_axis_units_and_named_legend(runs):
    from mlaprof.analysis.diff import diff
    from mlaprof.analysis.run_summary import build_summary

    bug, fix = runs
    figs = F.run_figures(build_summary(bug), diff=diff(build_summary(bug), build_summary(fix)))
    engine_only = set(F.ENGINE_FIGURES)  # a scenario run is no recorded engine
    assert [s for s, _ in figs] == ["diff"] + [s for s, _ in F.RUN_FIGURES if s not in engine_only]
    for stem, fig in figs:
        assert fig.layout.title.text and bug.name in fig.layout.title.text, stem
        for t in fig.data:
            if t.showlegend is not False and t.type != "waterfall":
                assert t.name, f"{stem}: unnamed legend entry"
        axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
        titled = [a for a in axes if a.title.text]
        assert titled, stem
        if stem not in ("timeline", "diff", "kernel_time"):  # y axes of named lanes / rows
            assert all(a.title.text for a in axes if a.visible is not False), stem
        assert any("(" in a.title.text for a in titled), f"{stem}: no unit in axis titles"


def test_splits_by_step_plots_the_table_values(runs):
    bug, _ = runs
    fig = F.splits_used_vs_deserved(bug)
    sp = bug.splits
    own = sp[sp["policy"] == "aiter-gluon-v0.1.19"].sort_values("step")
    assert list(trace(fig, "S used").y) == own["used"].tolist()
    assert list(trace(fig, "S deserved").y) == own["deserved"].tolist()
    # the bug's FULL capture failed: no graph froze an S, so none is drawn (the splits table's
    # rule, mlaprof.analysis.splits.frozen_stands); the fix's captured graph has one
    assert "S frozen in the captured graph" not in [t.name for t in fig.data]
    _, fix = runs
    fsp = fix.splits[fix.splits["policy"] == "aiter-gluon-v0.1.19"].sort_values("step")
    frozen = trace(F.splits_used_vs_deserved(fix), "S frozen in the captured graph")
    assert list(frozen.y) == fsp["frozen"].tolist() and set(frozen.y) == {1}
    assert list(trace(fig, "S used").x) == own["step"].tolist()
    # the bug: padding rows pin min_kv to qlen, S collapses to 1 while real rows deserve 16
    assert set(trace(fig, "S used").y) == {1} and set(trace(fig, "S deserved").y) == {16}
    assert (
        "aiter-gluon-v0.1.19" in fig.layout.title.text
        and "mi355x (256 CUs)" in fig.layout.title.text
    )
    assert fig.layout.yaxis.type == "log" and "KV splits S (count" in fig.layout.yaxis.title.text
    assert fig.layout.xaxis.title.text == "engine step"


def test_splits_several_policies_and_unknown_policy(runs):
    bug, _ = runs
    fig = F.splits_used_vs_deserved(bug, policy=list(POLICY_NAMES))
    for pol in POLICY_NAMES:
        want = bug.splits.query("policy == @pol").sort_values("step")["used"].tolist()
        assert list(trace(fig, f"S used ({pol})").y) == want
    with pytest.raises(MlaprofError, match="no splits recorded for policy nope"):
        F.splits_used_vs_deserved(bug, policy="nope")
    with pytest.raises(MlaprofError, match="by must be one of"):
        F.splits_used_vs_deserved(bug, by="kernel")


def test_splits_by_policy_capture_size_and_layer(runs):
    bug, _ = runs
    last = bug.splits[bug.splits["step"] == bug.splits["step"].max()]
    fig = F.splits_used_vs_deserved(bug, by="policy")
    used = trace(fig, "S used (as the run's metadata drives it)")
    assert list(used.x) == last["policy"].tolist()
    assert list(used.y) == last["used"].tolist()
    assert "at step 4" in fig.layout.title.text

    fig = F.splits_used_vs_deserved(bug, by="capture_size")
    assert list(trace(fig, "S used").x) == ["16"]  # 3 requests x qlen 4 padded to 16 tokens
    assert list(trace(fig, "S deserved").y) == [16.0]
    assert fig.layout.xaxis.title.text == "capture size (padded tokens)"

    fig = F.splits_used_vs_deserved(bug, by="layer")
    med = bug.layers.groupby("layer")["splits_used"].median()
    assert list(trace(fig, "S used").y) == med.tolist()
    assert list(trace(fig, "S used").x) == [0, 1, 2]
    assert "per layer, policy aiter-gluon-v0.1.19" in fig.layout.title.text


def test_occupancy_in_percent_per_policy_and_step(runs):
    bug, _ = runs
    fig = F.occupancy(bug)
    med = bug.splits.groupby("policy")["occupancy_used"].median()
    used = trace(fig, "with S used")
    assert list(used.x) == list(POLICY_NAMES)
    assert list(used.y) == pytest.approx([100 * med[p] for p in POLICY_NAMES])
    assert fig.layout.yaxis.title.text == "CUs busy with real work (%)"
    fig = F.occupancy(bug, by="step")
    own = bug.splits.query("policy == 'aiter-gluon-v0.1.19'").sort_values("step")
    assert list(trace(fig, "with S deserved").y) == pytest.approx(
        (own["occupancy_deserved"] * 100).tolist()
    )


def test_timeline_microsecond_lanes_match_the_tables(runs):
    bug, fix = runs
    fig = F.step_timeline(bug, steps=[1, 2])
    st = bug.steps.query("step in [1, 2]")
    t0 = st["t_start_ns"].min()
    steps = trace(fig, "step, FULL shape, eager on the CPU")  # a CPU run captures nothing
    assert list(steps.x) == pytest.approx((st["duration_ns"] / 1e3).tolist())
    assert list(steps.base) == pytest.approx(((st["t_start_ns"] - t0) / 1e3).tolist())
    sync_layers = trace(fig, "layer with host syncs (cannot be graph-captured)")
    assert len(sync_layers.x) == 2 * 3
    kern = [t for t in fig.data if t.type == "bar" and t.name.startswith("kernel ")]
    assert {t.name for t in kern} == {"kernel mla_split_kv_stage1", "kernel mla_split_kv_reduce"}
    assert sum(len(t.x) for t in kern) == 2 * 3 * 2
    assert set(kern[0].y) == {"kernels, stream 7"}
    assert fig.layout.xaxis.type == "linear" and "(µs)" in fig.layout.xaxis.title.text
    assert list(fig.layout.yaxis.categoryarray) == ["steps", "layers", "kernels, stream 7"]
    assert "2 of 5 steps (step ids 1, 2)" in fig.layout.title.text  # a count beside a count
    fixed = F.step_timeline(fix)
    assert "layer (no host sync)" in {t.name for t in fixed.data}
    assert "layer with host syncs (cannot be graph-captured)" not in {t.name for t in fixed.data}


def test_timeline_of_an_imported_trace_has_kernel_lanes_only(tmp_path):
    w = create_run(tmp_path, "imported", {"source": "rocprofv3"})
    names = [f"kernel_{i % 12}" for i in range(40)]
    w.add_many(
        "kernels",
        [
            {"name": n, "start_ns": 1000 * i, "end_ns": 1000 * i + 700, "stream": i % 2}
            for i, n in enumerate(names)
        ],
    )
    w.finish()
    with mlaprof.load(w.run_dir) as run:
        fig = F.step_timeline(run, max_kernels=30)
    assert fig.layout.title.text.startswith("Kernel timeline (first 30 of 40 kernels)")
    lanes = list(fig.layout.yaxis.categoryarray)
    assert lanes == ["kernels, stream 0", "kernels, stream 1"]
    assert sum(len(t.x) for t in fig.data if t.type == "bar") == 30
    assert "other kernels" in {t.name for t in fig.data}  # 12 names > 8 with their own entry


def test_time_breakdown_per_layer_and_per_kernel(runs, tmp_path):
    bug, _ = runs
    fig = F.time_breakdown(bug, by="layer")
    g = bug.layers.groupby("layer")["duration_ns"]
    bars = fig.data[0]
    assert list(bars.x) == [0, 1, 2]
    assert list(bars.y) == pytest.approx((g.median() / 1e3).tolist())
    assert list(bars.error_y.array) == pytest.approx(((g.max() - g.median()) / 1e3).tolist())
    assert fig.layout.yaxis.title.text == "layer time (µs)"
    assert "median over 5 steps" in fig.layout.title.text

    fig = F.time_breakdown(bug)
    k = bug.kernels.assign(d=(bug.kernels["end_ns"] - bug.kernels["start_ns"]) / 1e3)
    want = k.groupby("name")["d"].sum().sort_values()
    assert list(fig.data[0].y) == list(want.index)  # largest on top (last)
    assert list(fig.data[0].x) == pytest.approx(want.tolist())
    assert f"{len(k)} launches of 2 kernel names" in fig.layout.title.text
    assert fig.layout.xaxis.title.text == "GPU time (µs, summed over launches)"

    w = create_run(tmp_path, "many", {})
    w.add_many(
        "kernels",
        [
            {"name": f"void k{i}<int>(float*)", "start_ns": 0, "end_ns": 1000 * (i + 1)}
            for i in range(6)
        ],
    )
    w.finish()
    with mlaprof.load(w.run_dir) as run:
        fig = F.time_breakdown(run, top=4)
    assert list(fig.data[0].y) == [
        "other kernels (2 names)",
        "k2<int>",
        "k3<int>",
        "k4<int>",
        "k5<int>",
    ]
    assert list(fig.data[0].x) == pytest.approx([3.0, 3.0, 4.0, 5.0, 6.0])
    with pytest.raises(MlaprofError, match="by must be"):
        F.time_breakdown(run, by="step")


def test_padding_waterfall_sums(runs):
    bug, _ = runs
    fig = F.padding_waterfall(bug)
    pad = bug.padding
    rows, tokens, kv = (t for t in fig.data if t.type == "waterfall")
    assert list(rows.y[:2]) == [pad["real_rows"].sum(), pad["padding_rows"].sum()]
    assert list(tokens.y[:2]) == [pad["real_tokens"].sum(), pad["padding_tokens"].sum()]
    assert kv.y[0] == pytest.approx(pad["kv_bytes_real"].sum() / 2**20)
    assert list(rows.measure) == ["absolute", "relative", "total"]
    assert "25.0% of requests" in fig.layout.title.text  # 1 padding row per 4
    one = F.padding_waterfall(bug, step=2)
    assert list(next(iter(one.data)).y[:2]) == [3, 1]
    assert "capture size 16" in one.layout.title.text
    with pytest.raises(MlaprofError, match="no padding record for step 99"):
        F.padding_waterfall(bug, step=99)


def test_capture_memory_views_in_mib(runs):
    bug, _ = runs
    fig = F.capture_memory(bug)
    mem = bug.memory.sort_values("capture_size")
    pool = trace(fig, "private graph memory pool")
    assert list(pool.x) == [str(s) for s in mem["capture_size"]]
    assert list(pool.y) == pytest.approx((mem["pool_bytes"] / 2**20).tolist())
    drv = trace(fig, "driver free-memory delta (what vLLM logs)")
    assert list(drv.y) == pytest.approx((mem["driver_bytes"] / 2**20).tolist())
    assert "42.0 MiB total (driver view)" in fig.layout.title.text
    assert any("size 16" in a.text for a in fig.layout.annotations)
    assert fig.layout.yaxis.title.text == "memory (MiB)"


def test_full_vs_fallback_medians_and_ratio(runs, tmp_path):
    """A GPU run's FULL replays against its PIECEWISE fallback; a CPU run's steps are each
    labelled with the mode whose shape they ran eagerly, never as graph replays."""
    cpu, _ = runs
    labels = list(trace(F.full_vs_fallback(cpu), "median step time").x)
    assert labels == ["FULL shape, eager on the CPU", "PIECEWISE shape, eager on the CPU"]
    assert "x FULL" not in F.full_vs_fallback(cpu).layout.title.text
    bug = mlaprof.load(write_run(tmp_path, "bug", device="cuda"))
    fix = mlaprof.load(write_run(tmp_path, "fix", fixed=True, fallback_steps=(), device="cuda"))
    fig = F.full_vs_fallback(bug)
    med = trace(fig, "median step time")
    assert list(med.x) == ["FULL graph", "PIECEWISE fallback"]
    st = bug.steps
    full = st[st["graph_mode"] == "FULL"]["duration_ns"].median() / 1e3
    pw = st[st["graph_mode"] == "PIECEWISE"]["duration_ns"].median() / 1e3
    assert list(med.y) == pytest.approx([full, pw])
    assert f"PIECEWISE fallback is {pw / full:.1f}x FULL" in fig.layout.title.text
    assert fig.layout.yaxis.title.text == "step time (µs)"
    assert any("aten._local_scalar_dense" in a.text for a in fig.layout.annotations)
    assert "all 5 steps ran FULL graph" in F.full_vs_fallback(fix).layout.title.text
    bug.close()
    fix.close()


def test_diff_table_and_figure(runs):
    from mlaprof.analysis.run_summary import build_summary

    bug, fix = (build_summary(r) for r in runs)  # the figures draw summaries, never runs
    t = F.diff_table(bug, fix).set_index("metric")
    sites = "sync / allocation sites in the region"
    assert t.loc[sites, "a"] == 2  # two ops at one source line, on every layer
    assert t.loc[sites, "b"] == 0
    assert t.loc[sites, "verdict"] == "better"
    s_used = "KV splits S used (run's policy, worst step)"
    assert t.loc[s_used, ["a", "b"]].tolist() == [1, 16]
    assert t.loc[s_used, "verdict"] == "better"
    assert t.loc["padding waste (share of verify tokens)", "verdict"] == "same"
    fig = F.run_diff(bug, fix)
    better = trace(fig, "B is better")
    assert "sync / allocation sites in the region (count)" in better.y
    i = list(better.y).index("KV splits S used (run's policy, worst step) (S)")
    assert better.x[i] == pytest.approx(400.0)  # +1500% clipped to the cap
    assert better.text[i] == "1 → 16, ×16.00"
    assert "A (bug)" in fig.layout.title.text and "B (fix)" in fig.layout.title.text
    assert "change from A to B (%" in fig.layout.xaxis.title.text


def test_dataframes_in_and_rank_selection(runs):
    bug, _ = runs
    sp = bug.splits
    assert list(trace(F.splits_used_vs_deserved(sp), "S used (aiter-gluon-v0.1.19)").y)
    other = sp.assign(rank=1, used=sp["used"] * 2)
    both = pd.concat([sp, other], ignore_index=True)
    own = "aiter-gluon-v0.1.19"
    r0 = F.splits_used_vs_deserved({"splits": both}, policy=own)
    r1 = F.splits_used_vs_deserved({"splits": both}, policy=own, rank=1)
    assert set(trace(r0, "S used").y) == {1} and set(trace(r1, "S used").y) == {2}
    with pytest.raises(MlaprofError, match="no rank 5"):
        F.splits_used_vs_deserved({"splits": both}, rank=5)
    with pytest.raises(MlaprofError, match="lacks column"):
        F.padding_waterfall(sp)


def test_empty_run_gives_placeholders(tmp_path):
    w = create_run(tmp_path, "empty", {})
    w.finish()
    with mlaprof.load(w.run_dir) as run:
        for stem, build in F.RUN_FIGURES:
            fig = build(run)
            assert is_empty(fig), stem
            assert fig.layout.annotations[0].text.startswith("no "), stem
        from mlaprof.analysis.run_summary import build_summary

        assert F.run_figures(build_summary(run)) == []


def test_missing_plotly_says_what_to_install(runs, monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)
    with pytest.raises(MissingExtraError, match=r"pip install -e \. in the mlaprof checkout"):
        F.padding_waterfall(runs[0])


def test_splits_decided_on_the_device_are_not_drawn_as_s_used(runs):
    """The persistent ASM schedule picks S on the device at every replay: its modelled host S
    is no "S used" bar or line, never frozen; S deserved stays and a note says why."""
    bug, _ = runs
    sp = bug.splits
    own = sp[sp["policy"] == "aiter-gluon-v0.1.19"]
    ps = own.assign(policy="aiter-asm-persistent", used=7, frozen=7)
    both = {"splits": pd.concat([own, ps], ignore_index=True)}
    note = "aiter-asm-persistent: S decided on the device at replay (never frozen)"

    fig = F.splits_used_vs_deserved(both, by="policy")
    used = trace(fig, "S used (as the run's metadata drives it)")
    at = dict(zip(used.x, used.y, strict=True))
    assert at["aiter-gluon-v0.1.19"] == 1 and at["aiter-asm-persistent"] is None
    frozen = trace(fig, "S frozen into a FULL graph captured with the dummy run")
    assert 7 not in list(frozen.y)
    assert dict(zip(trace(fig, "S deserved (real rows only)").x, trace(fig, "S deserved (real rows only)").y, strict=True))["aiter-asm-persistent"] == 16  # fmt: skip
    assert note in fig.layout.xaxis.title.text  # under the axis, off the legend

    for by in ("step", "capture_size"):
        fig = F.splits_used_vs_deserved(both, by=by, policy="aiter-asm-persistent")
        names = [t.name for t in fig.data]
        assert names == ["S deserved"], (by, names)
        assert note in fig.layout.xaxis.title.text
    fig = F.splits_used_vs_deserved(both, policy="aiter-gluon-v0.1.19")
    assert note not in fig.layout.xaxis.title.text  # host S: no note


def test_a_multi_rank_runs_figures_say_which_rank_they_draw(tmp_path) -> None:
    """Figures draw one rank of a multi-rank run (mixing them would double count): the title
    says which, and of how many; another rank is one argument away."""
    from mlaprof.store import create_run, load

    for rank, used in ((0, 16), (1, 1)):
        w = create_run(tmp_path, "two", {"source": "mlaprof run", "kind": "scenario",
                                         "scenario": {"policy": "aiter-gluon-v0.1.19"}},
                       rank=rank)  # fmt: skip
        w.add("splits", step=0, capture_size=16, policy="aiter-gluon-v0.1.19", used=used,
              deserved=17, frozen=1, target="mi355x")  # fmt: skip
        w.add(
            "splits",
            step=0,
            capture_size=16,
            policy="aiter-gluon-v0.1.19",
            used=used,
            deserved=17,
            frozen=1,
            target="mi355x",
        )  # a repeated row: one bar, no error
        w.finish("finished")
    with load(tmp_path / "two") as run:
        fig = F.splits_used_vs_deserved(run, by="policy")
        assert fig.layout.title.text.endswith(", rank 0 of 2")
        used = next(t for t in fig.data if t.name.startswith("S used"))
        assert list(used.y) == [16]
        one = F.splits_used_vs_deserved(run, by="policy", rank=1)
        assert list(next(t for t in one.data if t.name.startswith("S used")).y) == [1]


def test_every_figure_is_in_mlaprofs_template_and_the_callers_default_stays(runs, tmp_path):
    """Each figure (placeholders and the what-if heatmap among them) carries the plotly_white
    template (assigned as plotly assigns its default; validating it per figure cost ~13 ms),
    and a notebook's own default template is what it was after."""
    import plotly.io as pio

    bug, fix = runs
    white = pio.templates["plotly_white"].to_plotly_json()
    before = pio.templates.default
    pio.templates.default = "ggplot2"  # the caller's choice
    try:
        create_run(tmp_path, "empty", {"kind": "scenario"}).finish()
        empty_run = mlaprof.load(tmp_path / "empty")
        from mlaprof.analysis.diff import diff
        from mlaprof.analysis.run_summary import build_summary

        sa, sb = build_summary(bug), build_summary(fix)
        figs = [*F.run_figures(sa, diff=diff(sa, sb))]
        figs += [(stem, fn(empty_run)) for stem, fn in F.RUN_FIGURES]  # placeholders
        assert pio.templates.default == "ggplot2"
    finally:
        pio.templates.default = before
    assert any(is_empty(f) for _, f in figs) and "whatif" in dict(figs) and len(figs) > 10
    for stem, fig in figs:
        assert fig.layout.template.to_plotly_json() == white, stem


def test_s_bars_are_on_a_log2_axis_where_1_and_4_differ(runs) -> None:
    """On a linear axis to 256 the finding (S 1 used, 4 deserved) was two flat bars: each
    doubling is now one tick (1, 2, 4, ... 256), and a bar of S = 1 still has a height."""
    import math

    bug, _ = runs
    for by in ("policy", "capture_size", "layer"):
        fig = F.splits_used_vs_deserved(bug, by=by)
        y = fig.layout.yaxis
        assert y.type == "log" and list(y.tickvals)[:5] == [1, 2, 4, 8, 16], by
        assert y.range[0] < 0 < math.log10(4)  # the axis starts below 1: S = 1 is a bar
    fig = F.splits_used_vs_deserved(bug, by="policy")
    used = trace(fig, "S used (as the run's metadata drives it)")
    assert 1 in list(used.y) and max(v for v in used.y if v) >= 16


def test_no_note_sits_over_the_legend_or_the_bar_labels(runs) -> None:
    """A note drawn above the plot sat on the legend; "not applicable" level at y = 0 ran over
    the neighbouring bars' values. Notes go under the x axis; a policy's own note stands
    upright in its own column."""
    bug, _ = runs
    sp = bug.splits
    own = sp[sp["policy"] == "aiter-gluon-v0.1.19"]
    na = own.assign(policy="aiter-gluon-bh64", used=None, deserved=None, frozen=None,
                    note="not runnable: bh64 needs 64 or 128 heads, got 8")  # fmt: skip
    ps = own.assign(policy="aiter-asm-persistent", used=7, frozen=7)
    fig = F.splits_used_vs_deserved({"splits": pd.concat([own, na, ps])}, by="policy")
    anns = list(fig.layout.annotations)
    assert anns and all(a.textangle == -90 and a.yref == "paper" and a.y == 0 for a in anns)
    assert all(a.x == "aiter-gluon-bh64" for a in anns)
    assert all(len(line) <= 60 for a in anns for line in a.text.split("<br>"))
    legend_top = fig.layout.legend.y
    assert legend_top >= 1 and not any((a.y or 0) >= 1 for a in anns)


def test_the_whatif_subtitle_reads_whole(runs) -> None:
    """The what-if subtitle (model, policy, device, time model) was one line cut at the right
    edge: it is broken into lines a report figure holds."""
    import re

    bug, _ = runs
    fig = F.whatif_heatmap(bug)
    sub = fig.layout.title.text.split("<br>", 1)[1]
    lines = [re.sub(r"<[^>]+>", "", x) for x in sub.split("<br>")]
    assert len(lines) >= 2 and all(len(x) <= 150 for x in lines), lines
    assert "time:" in " ".join(lines) and fig.layout.margin.t >= 150


def test_an_imported_traces_figure_title_never_reads_the_runs(tmp_path) -> None:
    """A trace records no split policy: its per-layer title said "policy the run's"."""
    from mlaprof.importers.rocprof import import_rocprof
    from tests.conftest import ROOT

    run = import_rocprof(ROOT / "tests/data/aiter/gluon_v0119_bug", tmp_path, "bug")[0]
    with mlaprof.load(run) as r:
        fig = F.splits_used_vs_deserved(r, by="layer")
    assert "the run's" not in fig.layout.title.text
    assert "per layer, split policy not recorded" in fig.layout.title.text


def test_a_small_padding_waste_never_reads_0_percent_in_the_waterfall() -> None:
    """A waste of 4.5 KiB over 62 MiB of KV is 0.007%: the waterfall's title and label read it
    as the analysis' share rule does (never "0.0%", the section beside it says 4.50 KiB)."""
    import dataclasses

    from mlaprof.figures.padding import padding_waterfall
    from tests import shipped_runs

    s = shipped_runs.summary("demo-fix-padding-active-rows-c16")
    r = s.series.ranks[0]
    big = dataclasses.replace(
        r, padding_steps=[dataclasses.replace(p, kv_bytes_real=64 << 20) for p in r.padding_steps]
    )
    fig = padding_waterfall(big, step=r.padding_steps[0].step)
    title = fig.layout.title.text
    assert "0.0% of KV" not in title and "0.01% of KV read per layer" in title, title
    labels = [t for tr in fig.data if tr.type == "waterfall" for t in tr.text]
    assert any("(0.01% wasted)" in t for t in labels), labels

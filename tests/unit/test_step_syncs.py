"""One sync count per layer and step: where an imported trace's host-sync check is the run's
count (its API trace's host syncs placed in MLA layers), the timeline's layer bars and one
step's layer rows (the TUI's per-step table) read that check's counts, as the sync-count section
and the layer table state them; never "not checked" beside "8 host syncs ... checked". A
layer nothing checked reads "not checked", a checked one with none clean, and the layer
drill-down's verdict is the analysis' (mlaprof.analysis.step_syncs.layer_verdict)."""

from __future__ import annotations

from pathlib import Path

import pytest

import mlaprof
from mlaprof.analysis.sections import LayerRow, TraceSyncs
from mlaprof.analysis.step_syncs import (
    CLEAN,
    FOUND,
    NOT_CHECKED,
    fill_host_syncs,
    host_sync_rows,
    layer_verdict,
)
from mlaprof.analysis.syncs import counted_by_host
from tests import shipped_runs

WORKER_GROUP = "shipped-runs"

# every shipped trace whose host-sync check counts (API trace, or all graph replays)
HOST_COUNTED = ("aiter-eager_syncs", "kineto_graph_replay", "aiter-fleet_dp2_tp4",
                "aiter-gluon_eager_short_kv", "aiter-two_ranks_one_lossy")  # fmt: skip


def _layer_bars(name: str) -> dict[tuple[int, int], tuple[str, object]]:
    """(step, layer) -> (the bar's series, its syncs) of the summary's timeline, rank 0."""
    tl = shipped_runs.summary(name).series.ranks[0].timeline
    return {(b.detail[0], b.detail[1]): (b.series, b.detail[2]) for b in tl.bars
            if b.lane == "layers"}  # fmt: skip


def test_the_timeline_reads_the_api_traces_sync_count() -> None:
    s = shipped_runs.summary("aiter-eager_syncs")
    assert s.sync_counts.checked and s.sync_counts.total == 8
    host = {(x.step, x.layer) for x in s.trace.syncs.syncs if x.rank == 0}
    bars = _layer_bars("aiter-eager_syncs")
    assert bars and set(bars) <= {(st, ly) for st, ly in bars}
    for key, (series, n) in bars.items():
        want = 1 if key in host else 0
        assert (series, n) == ("layer:sync" if want else "layer:clean", want), key


def test_graph_replays_checked_by_the_trace_read_clean() -> None:
    s = shipped_runs.summary("kineto_graph_replay")
    assert s.sync_counts.checked and s.sync_counts.total == 0
    assert {v for v in _layer_bars("kineto_graph_replay").values()} == {("layer:clean", 0)}


def test_the_figure_says_not_checked_only_where_nothing_checked() -> None:
    from mlaprof.figures.timeline import step_timeline

    fig = step_timeline(shipped_runs.summary("aiter-eager_syncs").series)
    names = {t.name for t in fig.data}
    assert "layer with host syncs (cannot be graph-captured)" in names
    assert not any("not checked" in str(n) or "not watched" in str(n) for n in names)


def test_a_run_nothing_watched_reads_not_checked(tmp_path: Path) -> None:
    """A run whose probe was off (``--check-syncs off``): every layer bar unwatched, said
    "not checked" (the project's words), never clean."""
    from mlaprof.analysis.run_summary import build_summary
    from mlaprof.figures.timeline import step_timeline

    run = _unwatched_run(tmp_path)
    with mlaprof.load(run) as r:
        s = build_summary(r)
    assert not s.sync_counts.checked
    tl = s.series.ranks[0].timeline
    assert {b.series for b in tl.bars if b.lane == "layers"} == {"layer:unwatched"}
    fig = step_timeline(s.series)
    layer = [t for t in fig.data if str(t.name).startswith("layer")]
    assert [t.name for t in layer] == ["layer (syncs not checked)"]
    assert {c[2] for c in layer[0].customdata} == {"not checked"}


def _unwatched_run(tmp_path: Path) -> Path:
    from mlaprof.store import create_run

    w = create_run(tmp_path, "off", {"kind": "scenario", "device": "cpu"})
    with w.transaction():
        for step in (0, 1):
            w.add("steps", step=step, t_start_ns=step * 1000, duration_ns=900, graph_mode="NONE")
            for layer in (0, 1):
                w.add("layers", step=step, layer=layer, t_start_ns=step * 1000 + layer * 400,
                      duration_ns=400, syncs=None)  # fmt: skip
    w.finish()
    return tmp_path / "off"


@pytest.mark.parametrize("name", HOST_COUNTED)
def test_the_per_step_counts_are_the_sync_count_sections(name: str) -> None:
    """The host check's per-step fill, counted per layer and watched step by the layer table's
    own rule, gives the summary's layer rows (their rate comes from host_sync_counts): the
    steps it fills are the steps the sync-count section says were checked."""
    from mlaprof.analysis.evidence import collect
    from mlaprof.analysis.layers import layer_table

    s = shipped_runs.summary(name)
    with mlaprof.load(shipped_runs.run_dir(name)) as run:
        ev = collect(run)
    t = ev.tables
    host = counted_by_host(t["layers"], t["syncs"], ev.host_syncs)
    assert host is not None and s.sync_counts.checked
    lay = fill_host_syncs(t["layers"], host, t["steps"])
    rows = layer_table(lay, host_sync_rows(host))
    assert {(r.rank, r.layer): r.syncs for r in rows} == {
        (r.rank, r.layer): r.syncs for r in s.layers
    }
    checked = lay[lay["syncs"].notna()].groupby("rank")["step"].nunique().to_dict()
    assert checked == {r.rank: r.watched_steps for r in s.sync_counts.per_rank or []}


def test_the_watched_steps_are_host_sync_counts_own() -> None:
    """The steps the per-step fill counts as checked, rank by rank, are the ones
    host_sync_counts states (its rule: a rank's eager steps where it has some, all of them
    where it replayed graphs only, none of a rank the check did not cover, MLA steps only),
    and the per-layer rates are its own."""
    import pandas as pd

    from mlaprof.analysis.layers import layer_table
    from mlaprof.analysis.sections import TraceSync
    from mlaprof.analysis.step_syncs import host_watched_steps
    from mlaprof.analysis.syncs import host_sync_counts

    modes = {0: ["eager", "eager", "graph", None], 1: ["graph", "graph", "graph", None],
             2: ["eager", "eager", "eager", None]}  # fmt: skip
    steps = pd.DataFrame(
        [(r, st, m, None if m is None else "aiter") for r, ms in modes.items()
         for st, m in enumerate(ms)],
        columns=["rank", "step", "graph_mode", "backend"],
    )  # fmt: skip
    layers = pd.DataFrame(
        [(r, st, ly, None) for r in modes for st in range(4) for ly in range(2)],
        columns=["rank", "step", "layer", "syncs"],
    ).assign(splits_used=None, splits_deserved=None, duration_ns=1)
    found = [TraceSync(rank=0, step=1, layer=1, op="hipMemcpy", t_ns=0, duration_ns=1)]
    host = TraceSyncs(count=1, evidence="from the API trace", provenance="imported",
                      status="found", syncs=found, ranks_checked=[0, 1],
                      ranks_not_checked=[2])  # fmt: skip
    counts = host_sync_counts(host, steps)
    w = host_watched_steps(host, steps)
    assert sorted(map(tuple, w.to_numpy().tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    assert w.groupby("rank")["step"].nunique().to_dict() == {
        r.rank: r.watched_steps for r in counts.per_rank or []
    }
    rows = layer_table(fill_host_syncs(layers, host, steps), host_sync_rows(host))
    rate = {(x.rank, x.layer): x.syncs for x in counts.per_layer or []}
    for r in rows:
        if r.rank == 2:
            assert r.syncs is None  # the check did not cover it: not checked, never 0
        else:
            assert r.syncs == rate.get((r.rank, r.layer), 0), r


def test_one_steps_layer_rows_read_the_host_check() -> None:
    """The TUI's per-step layer table (LiveFold.step_layers) of an imported trace, read with
    its summary: each layer's host syncs in that step, as the layer table counts them."""
    from mlaprof.tui.follower import RunFollower

    s = shipped_runs.summary("aiter-eager_syncs")
    f = RunFollower(shipped_runs.run_dir("aiter-eager_syncs"))
    try:
        f.poll()
        for step in (0, 1):
            rows = f.fold.step_layers(step, None, s)
            want = {x.layer for x in s.trace.syncs.syncs if x.step == step}
            assert rows and {r.layer: r.syncs for r in rows} == {
                r.layer: (1.0 if r.layer in want else 0.0) for r in rows
            }
        # without the summary nothing decided the host check: unknown, never a 0
        assert {r.syncs for r in f.fold.step_layers(0, None)} == {None}
    finally:
        f.close()


def _row(syncs: float | None) -> LayerRow:
    return LayerRow(S_min=None, S_reference=None, S_used=None, S_steps=0, collapsed=None,
                    layer=0, rank=0, reference="unknown", steps=1, syncs=syncs,
                    time_us=None)  # fmt: skip


HOST = TraceSyncs(count=1, evidence="from the API trace, 8 eager MLA layer windows",
                  provenance="imported", status="found", syncs=[])  # fmt: skip


def test_a_layers_verdict_never_reads_unknown_as_clean() -> None:
    v = layer_verdict(_row(None), 0, None)
    assert v.level == NOT_CHECKED and "not checked" in v.text
    assert layer_verdict(None, 0, HOST).level == NOT_CHECKED  # no row: nothing checked
    v = layer_verdict(_row(1.0), 0, HOST)  # counted from the API trace, no site recorded
    assert v.level == FOUND
    assert v.text.endswith("sites unknown: counted from the API trace, 8 eager MLA layer windows")
    assert layer_verdict(_row(2.0), 0, None).level == FOUND
    assert layer_verdict(_row(2.0), 2, None).text == "2 distinct sync/alloc sites in this layer"
    assert layer_verdict(_row(0.0), 0, None).level == CLEAN
    v = layer_verdict(_row(0.0), 0, HOST)
    assert v.level == CLEAN and v.text.startswith("checked: no host syncs in this layer")

"""The replay time's per-rank sums stored at a fleet import (mlaprof.analysis.replay_sums) give
the report the same figures as the SQL that joins every kernel to its layer, and are used only
where the layers analysed are the ones they were computed from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest

from mlaprof.analysis import replay_sums, replay_time
from mlaprof.analysis.evidence.common import load_tables
from mlaprof.analysis.evidence.model import run_meta
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import aggregates
from mlaprof.store.reader import Run

if TYPE_CHECKING:
    from mlaprof.analysis.sections import TraceReplayTime

DATA = Path(__file__).resolve().parents[1] / "data" / "aiter"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir, _ = import_rocprof(DATA / "fleet_dp2_tp4", tmp_path_factory.mktemp("f"), "f")
    return run_dir


def _by_sql(run: Run, layers: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> TraceReplayTime:
    with monkeypatch.context() as m:
        m.setattr(replay_time, "_pre_aggregated", lambda run, jl: None)
        return replay_time.replay_time(run_meta(run.meta), run, layers)


def test_a_fleet_import_stores_each_rank_s_sums(fleet: Path) -> None:
    with Run(fleet) as run:
        assert run.ranks == list(range(8))
        for r in run.ranks:
            steps, key = aggregates.read(run, r, replay_sums.STEPS)
            hist, _ = aggregates.read(run, r, replay_sums.HIST)
            assert steps.num_rows and hist.num_rows
            assert key["kernels"] == run.count_per_rank("kernels")[r]
            assert key["replays"] > 0


def test_the_stored_sums_give_the_sql_s_figures(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Run(fleet) as run:
        layers = load_tables(run)["layers"]
        jl = layers[[c for c in replay_time._JL if c in layers]]
        assert replay_time._pre_aggregated(run, jl) is not None  # the fast path is taken
        fast = replay_time.replay_time(run_meta(run.meta), run, layers)
        slow = _by_sql(run, layers, monkeypatch)
    assert fast.layers and fast.kernels and fast.replays
    assert fast == slow


def test_layers_left_out_by_the_analysis_run_the_sql(fleet: Path) -> None:
    with Run(fleet) as run:
        layers = load_tables(run)["layers"]
        jl = layers[[c for c in replay_time._JL if c in layers]]
        # a drafter's or a warm-up's steps dropped: the sums were computed with them
        first = jl[(jl["rank"] == 3)]["step"].min()
        dropped = jl[~((jl["rank"] == 3) & (jl["step"] == first))]
        assert replay_time._pre_aggregated(run, dropped) is None
        # a layer's end moved (the layers are not the ones imported)
        moved = jl.copy()
        moved.loc[moved.index[0], "duration_ns"] += 1
        assert replay_time._pre_aggregated(run, moved) is None


def test_a_rank_without_sums_runs_the_sql(tmp_path: Path) -> None:
    # one rank: its report joins in one query, the import stores no sums
    run_dir, _ = import_rocprof(DATA / "gluon_v0119_bug", tmp_path, "one")
    with Run(run_dir) as run:
        assert aggregates.read(run, 0, replay_sums.STEPS) is None
        layers = load_tables(run)["layers"]
        jl = layers[[c for c in replay_time._JL if c in layers]]
        assert replay_time._pre_aggregated(run, jl) is None


def _columns(n_steps: int = 3) -> tuple:
    """Two layers per step, three kernels per layer (the MLA one last), one after the last
    layer; ends strictly increasing."""
    names = ["gemm", "mla", "tail"]
    idx, start, end, step, layer = [], [], [], [], []
    ly = {"step": [], "layer": [], "t_start_ns": [], "duration_ns": []}
    t = 1000
    for s in range(n_steps):
        for lay in range(2):
            t0 = t
            for k, d in ((0, 30 + s), (0, 40), (1, 50 + lay)):
                idx.append(k)
                start.append(t)
                end.append(t + d)
                step.append(s)
                layer.append(lay if k == 1 else -1)
                t += d + 5
            ly["step"].append(s)
            ly["layer"].append(lay)
            ly["t_start_ns"].append(t0)
            ly["duration_ns"].append(end[-1] - t0)
        idx.append(2)
        start.append(t)
        end.append(t + 7)
        step.append(s)
        layer.append(-1)
        t += 500
    a = lambda v: np.array(v, np.int64)  # noqa: E731
    return (
        names,
        a(idx),
        a(start),
        a(end),
        a(step),
        a(step),
        a(layer),
        {k: a(v) for k, v in ly.items()},
    )


def test_rank_sums_windows_and_histogram() -> None:
    names, idx, start, end, step, replay, layer, ly = _columns()
    steps, hist, key = replay_sums.rank_sums(idx, start, end, step, replay, layer, ly)
    got = sorted(zip(steps["step"].tolist(), steps["win"].tolist(), steps["total"].tolist(),
                     steps["att"].tolist(), strict=True))  # fmt: skip
    # step 0: layer 0 = 30 + 40 + 50, layer 1 = 30 + 40 + 51, the tail kernel after: -1
    assert got[:3] == [(0, -1, 7.0, 0.0), (0, 0, 120.0, 50.0), (0, 1, 121.0, 51.0)]
    assert len(got) == 9 and key["replays"] == 3 and key["kernels"] == len(end)
    hist_names = [names[i] for i in hist["name_idx"].tolist()]
    counts = dict(zip(zip(hist_names, hist["d"].tolist(), strict=True), hist["c"].tolist(),
                      strict=True))  # fmt: skip
    assert counts[("gemm", 40)] == 6 and counts[("tail", 7)] == 3 and counts[("mla", 51)] == 3
    assert bool(hist["mla"][hist_names.index("mla")]) and not bool(hist["mla"][0])


def test_rank_sums_wide_durations_take_the_hash_path() -> None:
    names, idx, start, end, step, replay, layer, ly = _columns()
    dur, mla = end - start, layer != -1
    dense = replay_sums._merge_hist([replay_sums._hist_part(idx, dur, mla)])
    wide = replay_sums._merge_hist([replay_sums._hist_part(idx, dur * 10**9, mla)])
    assert wide["name_idx"].tolist() == dense["name_idx"].tolist()
    assert wide["d"].tolist() == [d * 10**9 for d in dense["d"].tolist()]
    assert wide["c"].tolist() == dense["c"].tolist()
    assert wide["mla"].tolist() == dense["mla"].tolist()


def test_pieces_sum_as_the_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    names, idx, start, end, step, replay, layer, ly = _columns(5)
    whole = replay_sums.rank_sums(idx, start, end, step, replay, layer, ly)
    whole_names = replay_sums.name_totals(names, idx, start, end)
    monkeypatch.setattr(replay_sums, "CHUNK", 4)  # runs of a layer cut between pieces
    cut = replay_sums.rank_sums(idx, start, end, step, replay, layer, ly)
    assert cut[2] == whole[2]
    for a, b in zip(cut[:2], whole[:2], strict=True):
        assert {k: list(v) for k, v in a.items()} == {k: list(v) for k, v in b.items()}
    cut_names = replay_sums.name_totals(names, idx, start, end)
    assert {k: list(v) for k, v in cut_names.items()} == {
        k: list(v) for k, v in whole_names.items()
    }


def test_tied_layer_ends_store_no_sums() -> None:
    names, idx, start, end, step, replay, layer, ly = _columns()
    ly["duration_ns"][1] = ly["t_start_ns"][0] + ly["duration_ns"][0] - ly["t_start_ns"][1]
    assert replay_sums.rank_sums(idx, start, end, step, replay, layer, ly) is None


def test_the_stored_per_name_sums_are_the_figures_query(
    fleet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlaprof.analysis import series

    with Run(fleet) as run:
        stored = series._stored_per_name(run)
        assert stored is not None and len(stored)
        fast = series._kernels_per_rank(run)
        with monkeypatch.context() as m:
            m.setattr(series, "_stored_per_name", lambda run: None)
            slow = series._kernels_per_rank(run)
    assert sorted(fast) == sorted(slow) == list(range(8))
    for r in slow:
        a, b = fast[r].reset_index(drop=True), slow[r].reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_exact=True)
        assert series.kernel_times(fast[r]) == series.kernel_times(slow[r])

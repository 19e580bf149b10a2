"""The live path (mlaprof.analysis.live): rows read since a row id from the databases being
written, folded into a provisional summary by the full analysis' own code. The oracle is the
full pass (build_summary over the run as the reader loads it) over the same committed rows."""

from __future__ import annotations

import json
from pathlib import Path

from mlaprof.analysis.live import FOLDED, LiveFold
from mlaprof.analysis.run_summary import build_summary
from mlaprof.store import create_run, load
from mlaprof.store.follow import RunFollow
from mlaprof.synthetic.dashboard import meta, write_step


def _fold(store: RunFollow, fold: LiveFold, limit: int) -> None:
    """Read every committed row in slices of ``limit`` rowids, interleaving the databases (as
    the dashboard's polls do)."""
    store.discover()
    while True:
        store.cut = False
        for key in store.databases:
            fold.set_status(key, *store.state(key))
            for rows in store.new_rows(key, limit, FOLDED):
                fold.add(rows)
        if not store.cut:
            return


def _same(path: Path, fold: LiveFold) -> None:
    prov, why = fold.provisional()
    assert prov is not None, why
    with load(path) as run:
        full = build_summary(run)
    a, b = (json.loads(json.dumps(s.to_json(), default=str)) for s in (prov, full))
    for section in b:
        assert a[section] == b[section], section


def _unwatched_step(w, step: int) -> None:  # noqa: ANN001
    """A step the sync probe did not watch: its layer rows leave ``syncs`` empty (not checked,
    never 0) and no sync row names it."""
    with w.transaction():
        w.add("steps", step=step, t_start_ns=step, duration_ns=5_000_000, num_reqs=4,
              num_real_reqs=3, qlen=4, real_tokens=12, padded_tokens=16, graph_mode="FULL",
              backend="legacy-flat", timing="cpu-wall")  # fmt: skip
        for layer in range(2):
            w.add("layers", step=step, layer=layer, t_start_ns=step, duration_ns=9_000_000,
                  syncs=None, splits_used=1, splits_deserved=16)  # fmt: skip


def test_the_provisional_summary_is_the_full_one_over_the_same_rows(tmp_path: Path) -> None:
    w0 = create_run(tmp_path, "r", meta("r", True), rank=0)
    w1 = create_run(tmp_path, "r", meta("r", True), rank=1)
    store, fold = RunFollow(tmp_path / "r"), LiveFold("r")
    store.exists()
    fold.meta = {"name": "r", **store.read_meta(False)}
    for s in range(5):  # rank 1 lags rank 0 by two steps: ranks differ, never merged
        write_step(w0, s, 2, True)
        if s < 3:
            write_step(w1, s, 2, False)
    _unwatched_step(w0, 5)
    _fold(store, fold, limit=7)  # slices cut mid-table and mid-step
    _same(tmp_path / "r", fold)
    prov, _ = fold.provisional()
    per_rank = {r.rank: r.steps for r in prov.timing.per_rank}
    assert per_rank == {0: 6, 1: 3}
    syncs = {(r.rank, r.layer): r.syncs for r in prov.layers}
    assert syncs[(0, 1)] == 2  # per watched step: the unwatched step is not a checked 0
    assert prov.sync_counts.per_rank[0].watched_steps == 5
    # the run grows: a poll folds only what arrived, and still equals the full pass
    n0 = fold.rows.get("steps")
    for s in range(3, 7):
        write_step(w1, s, 2, False)
    _fold(store, fold, limit=1000)
    assert fold.rows["steps"] == n0 + 4
    _same(tmp_path / "r", fold)
    w0.finish()
    w1.finish()
    _fold(store, fold, limit=1000)
    assert fold.status == "finished"
    _same(tmp_path / "r", fold)
    store.close()


def test_the_step_series_and_one_steps_layers_are_the_recorded_rows(tmp_path: Path) -> None:
    w = create_run(tmp_path, "r", meta("r", True))
    for s in range(4):
        write_step(w, s, 3, True)
    store, fold = RunFollow(tmp_path / "r"), LiveFold("r")
    store.exists()
    fold.meta = {"name": "r", **store.read_meta(False)}
    _fold(store, fold, limit=5)
    with load(tmp_path / "r") as run:
        steps, layers = run.steps, run.layers
    live = fold.live_summary(None, True)
    ser = live.series[0]
    assert list(ser.values_ms) == [d / 1e6 for d in steps["duration_ns"]]
    assert ser.p50 == float(steps["duration_ns"].median()) / 1e6  # a median, never a mean
    assert live.step_ids == {0: (0, 1, 2, 3)}
    rows = fold.step_layers(2, None)
    want = layers[layers["step"] == 2]
    assert [r.time_us for r in rows] == [d / 1e3 for d in want["duration_ns"]]
    w.finish()
    store.close()


def test_the_live_fold_reads_an_imported_exports_status_as_the_store_does() -> None:
    """An import of an export of a killed run: its databases finished (the import did), its
    run.json carries the exported run's status; the dashboard's fold says what the reader says."""
    from mlaprof.store import liveness

    fold = LiveFold("back")
    fold.meta = {
        "status": "finished",
        liveness.EXPORTED_STATUS: "incomplete",
        liveness.EXPORTED_REASON: "its writer stopped without finishing",
    }
    fold.set_status((0, ""), "finished")
    assert (
        fold.status
        == liveness.process_run_status([("", "finished")], "finished", "incomplete")
        == "incomplete"
    )
    assert fold.reason == (
        "the run this was exported from was incomplete: its writer stopped without finishing"
    )
    fold.meta = {"status": "finished"}
    assert fold.status == "finished" and fold.reason is None

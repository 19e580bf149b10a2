"""The follower: incremental aggregation matches the tables, and broken runs give one message."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.store import create_run, load
from mlaprof.synthetic.dashboard import make_run, meta, write_step
from mlaprof.tui.follower import FollowError, RunFollower
from tests.trace_io_helpers import DATA


def _layer_means(run_path: Path, rank: int | None = None) -> dict[int, tuple[float, int]]:
    """Per-layer mean time (ms) and total syncs computed independently with pandas."""
    with load(run_path) as run:
        df = run.layers
    if rank is not None:
        df = df[df["rank"] == rank]
    g = df.groupby("layer").agg(t=("duration_ns", "mean"), s=("syncs", "sum"))
    return {int(k): (float(r.t) / 1e6, int(r.s)) for k, r in g.iterrows()}


def test_aggregates_match_tables(tmp_path: Path) -> None:
    p = make_run(tmp_path, "bug", steps=9, layers=4, ranks=2)
    f = RunFollower(p)
    n = f.poll()
    with load(p) as run:
        total = sum(run.count(t) for t in ("steps", "layers", "syncs", "splits", "padding"))
        assert n >= total
        steps = run.steps
    v = f.view()
    assert v.steps == len(steps) == 18
    assert v.rank_label == "all ranks"
    want = _layer_means(p)
    got = {r["layer"]: (r["time_ms"], r["syncs"]) for r in v.layers}
    assert set(got) == set(want)
    for k, (t, s) in want.items():
        assert got[k][0] == pytest.approx(t, rel=1e-12)
        assert got[k][1] == s
    v1 = f.view(rank=1)
    assert v1.steps == 9
    assert {r["layer"]: r["syncs"] for r in v1.layers} == {
        k: s for k, (_, s) in _layer_means(p, 1).items()
    }
    # latency stats equal the steps table's
    assert v.latency["max"] == pytest.approx(steps["duration_ns"].max() / 1e6)
    assert v.latency["mean"] == pytest.approx(steps["duration_ns"].mean() / 1e6)


def test_incremental_poll_reads_only_new_rows(tmp_path: Path) -> None:
    w = create_run(tmp_path, "live", meta("live", True))
    f = RunFollower(tmp_path / "live")
    f.poll()  # the rank's status (running) is the only news
    assert f.poll() == 0
    v = f.view()
    assert v.steps == 0 and v.layers == [] and v.status == "running"
    for s in range(3):
        write_step(w, s, 2, True)
    first = f.poll()
    assert first > 0
    assert f.poll() == 0  # nothing new
    write_step(w, 3, 2, True)
    assert 0 < f.poll() < first
    v = f.view()
    assert v.steps == 4
    assert f.step_ids(None) == [0, 1, 2, 3]
    w.finish()
    f.poll()
    assert f.view().status == "finished"
    want = _layer_means(tmp_path / "live")
    assert {r["layer"]: r["syncs"] for r in f.view().layers} == {k: s for k, (_, s) in want.items()}


def test_step_layers_match_the_step(tmp_path: Path) -> None:
    p = make_run(tmp_path, "bug", steps=6, layers=3)
    f = RunFollower(p)
    f.poll()
    with load(p) as run:
        df = run.layers
    rows = {r["layer"]: r for r in f.step_layers(4, None)}
    want = df[df["step"] == 4]
    assert len(rows) == len(want) == 3
    for _, r in want.iterrows():
        assert rows[r.layer]["time_ms"] == pytest.approx(r.duration_ns / 1e6)
        assert rows[r.layer]["used"] == r.splits_used
    v = f.view(step=4)
    assert v.layer_scope == "step 4"


def test_sort_layers(tmp_path: Path) -> None:
    f = RunFollower(make_run(tmp_path, "bug", steps=3, layers=5))
    f.poll()
    times = [r["time_ms"] for r in f.view(layer_sort=("time_ms", True)).layers]
    assert times == sorted(times, reverse=True)
    assert [r["layer"] for r in f.view().layers] == [0, 1, 2, 3, 4]


def test_waiting_for_a_run_that_does_not_exist_yet(tmp_path: Path) -> None:
    f = RunFollower(tmp_path / "later")
    assert f.poll() == 0
    assert "waiting" in (f.problem or "")
    make_run(tmp_path, "later", steps=2)
    assert f.poll() > 0
    assert f.problem is None and f.view().steps == 2


def test_deleted_run(tmp_path: Path) -> None:
    p = make_run(tmp_path, "gone", steps=2)
    f = RunFollower(p)
    f.poll()
    shutil.rmtree(p)
    with pytest.raises(FollowError, match="deleted"):
        f.poll()
    assert "deleted" in f.view().problem


def test_truncated_database(tmp_path: Path) -> None:
    p = make_run(tmp_path, "trunc", steps=40, layers=4)
    f = RunFollower(p)
    f.poll()
    db = p / "rank0.db"
    with open(db, "r+b") as fh:
        fh.truncate(db.stat().st_size // 3)
    with pytest.raises(FollowError):
        f.poll()
    assert f.problem


def test_corrupted_database(tmp_path: Path) -> None:
    p = make_run(tmp_path, "corrupt", steps=40, layers=4)
    f = RunFollower(p)
    f.poll()
    db = p / "rank0.db"
    data = bytearray(db.read_bytes())
    data[16:] = b"\xa5" * (len(data) - 16)  # keep the magic string, garble the rest
    db.write_bytes(bytes(data))
    with pytest.raises(FollowError, match="cannot be read"):
        f.poll()
    with pytest.raises(FollowError, match="cannot be read"):
        RunFollower(p).poll()  # and a fresh follower


def test_other_schema_version(tmp_path: Path) -> None:
    p = make_run(tmp_path, "old", steps=1)
    con = sqlite3.connect(p / "rank0.db")
    con.execute("PRAGMA user_version=99")
    con.commit()
    con.close()
    with pytest.raises(FollowError, match="schema version 99"):
        RunFollower(p).poll()


def test_rank_joining_later(tmp_path: Path) -> None:
    w0 = create_run(tmp_path, "mr", meta("mr", False), rank=0)
    write_step(w0, 0, 2, False)
    f = RunFollower(tmp_path / "mr")
    f.poll()
    assert f.view().ranks == [0]
    w1 = create_run(tmp_path, "mr", meta("mr", False), rank=1)
    write_step(w1, 0, 2, False)
    for _ in range(4):  # new ranks are looked for every few polls
        f.poll()
    assert f.view().ranks == [0, 1]
    assert f.view().steps == 2
    w0.finish()
    w1.finish()


def test_findings_read_analysing_until_the_analysis_is_in_then_follow_the_run(
    tmp_path: Path,
) -> None:
    import threading
    import time

    from mlaprof.tui.follower import follow

    w = create_run(tmp_path, "live", meta("live", True))
    for s in range(3):
        write_step(w, s, 2, True)
    f = RunFollower(tmp_path / "live")
    f.poll()
    v = f.view()
    assert v.findings == [] and v.findings_source == "analysing..." and v.capture == "analysing..."
    stop, paused = threading.Event(), threading.Event()
    updates: list[int] = []
    t = threading.Thread(
        target=follow,
        args=(f, updates.append, lambda _t: None, stop, paused, 0.02, 0.05),
        daemon=True,
    )
    t.start()

    def wait(cond) -> None:  # noqa: ANN001
        deadline = time.monotonic() + 20
        while not cond():
            assert time.monotonic() < deadline, "the analysis never came in"
            time.sleep(0.02)

    try:
        wait(lambda: f.analysis is not None)
        v = f.view()
        assert v.findings_source == "mlaprof.analysis" and v.findings
        assert f.analysis["timing"]["steps"] == 3
        for s in range(3, 6):  # the run grows: a later pass sees the new steps
            write_step(w, s, 2, True)
        wait(lambda: f.analysis["timing"]["steps"] == 6)
    finally:
        stop.set()
        t.join(5)
        w.finish()


def test_a_slow_poll_interval_still_starts_the_first_analysis(tmp_path: Path) -> None:
    """The first findings pass waits until the caught-up run is drawn, not for the next poll:
    with an hour between polls it still comes in within seconds."""
    import threading
    import time

    from mlaprof.tui.follower import follow

    make_run(tmp_path, "done", steps=3, layers=2)
    f = RunFollower(tmp_path / "done")
    stop, paused = threading.Event(), threading.Event()
    t = threading.Thread(
        target=follow, args=(f, lambda _n: None, lambda _t: None, stop, paused, 3600.0), daemon=True
    )
    t.start()
    try:
        deadline = time.monotonic() + 20
        while f.analysis is None:
            assert time.monotonic() < deadline, "the first analysis never started"
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(5)


def test_imported_layers_in_their_side_file_read_live_as_from_sqlite(tmp_path: Path) -> None:
    """An import keeps its layers in Parquet side files: the live view groups them exactly as
    the SQL over a database holding the same rows does, per rank, and finds each step's layers
    (the run's own table is the oracle)."""
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.store import follow
    from mlaprof.store.schema import TABLES

    run_dir, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path, "fleet")
    store = follow.RunFollow(run_dir)
    found = store.discover()
    assert len(found) == 8 and all(c["layers"] > 0 for c in found.values())
    with load(run_dir) as run:
        layers = run.layers
    cols = [c for c, _ in TABLES["layers"]]
    for rank in found:
        side = {b.table: b for b in store.new_rows(rank, 10**9) if b.lo >= follow.SIDE_ROWID}
        got = side["layers"].groups
        mine = layers[layers["rank"] == rank]
        # the oracle: the same rows in SQLite, grouped by the live SQL (rowids from 1)
        con = sqlite3.connect(":memory:")
        con.execute(f"CREATE TABLE layers ({', '.join(cols)})")
        rows = [
            tuple(None if pd.isna(v) else int(v) for v in r) for r in mine[cols].itertuples(False)
        ]
        con.executemany(f"INSERT INTO layers VALUES ({', '.join('?' * len(cols))})", rows)
        want = follow._layers(con, 0, len(rows))
        shift = follow.SIDE_ROWID
        assert sorted(got["sums"]) == sorted(want["sums"])
        assert sorted(got["splits"], key=repr) == sorted(want["splits"], key=repr)
        assert sorted(got["last"]) == sorted(want["last"])
        assert sorted((s, a - shift, b - shift) for s, a, b in got["rowids"]) == sorted(
            want["rowids"]
        )
        for step, lo, hi in got["rowids"][:3]:
            assert sorted(store.step_layers(rank, lo, hi, step)) == sorted(
                r[1:] for r in con.execute(
                    "SELECT step, layer, duration_ns, syncs, splits_used, splits_deserved "
                    "FROM layers WHERE step = ?", (step,)
                )
            )  # fmt: skip
        assert not list(store._side_batches(rank))  # handed out once
    store.close()
    # and the dashboard's follower shows the run's own per-layer means
    f = RunFollower(run_dir)
    f.poll()
    want_means = _layer_means(run_dir)
    got_means = {r["layer"]: r["time_ms"] for r in f.view().layers}
    assert set(got_means) == set(want_means)
    for k, (t, _) in want_means.items():
        assert got_means[k] == pytest.approx(t, rel=1e-12)


def test_side_file_groups_equal_the_live_sql_on_mixed_rows(tmp_path: Path) -> None:
    """The live grouping SQL run by DuckDB over a side file gives what SQLite gives on the same
    rows in a database, on rows where order matters (a layer's S changes, NULLs in every column
    the groups read), and so does a step's layer lookup."""
    import duckdb
    import numpy as np

    from mlaprof.store import columnar, follow
    from mlaprof.store.schema import TABLES

    rng = np.random.default_rng(7)
    cols = [c for c, _ in TABLES["layers"]]
    n = 400

    def maybe_null(a: np.ndarray, p: float) -> list[int | None]:
        return [None if rng.random() < p else int(v) for v in a]

    data = {
        "step": [int(v) for v in np.repeat(np.arange(n // 5), 5)],
        "layer": [int(v) for v in np.tile(np.arange(5), n // 5)],
        "t_start_ns": [int(v) for v in rng.integers(0, 10**9, n)],
        "duration_ns": maybe_null(rng.integers(1, 10**6, n), 0.1),
        "syncs": maybe_null(rng.integers(0, 3, n), 0.5),
        "splits_used": maybe_null(rng.integers(1, 5, n), 0.2),
        "splits_deserved": maybe_null(rng.integers(1, 5, n), 0.2),
    }
    numbers = {}
    for c in cols:
        mask = np.array([v is None for v in data[c]])
        numbers[c] = (np.array([-1 if v is None else v for v in data[c]], np.int64), mask)
    side = columnar.write(tmp_path, 0, "layers", [columnar.build("layers", 0, n, numbers)])
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE layers ({', '.join(cols)})")
    con.executemany(
        f"INSERT INTO layers VALUES ({', '.join('?' * len(cols))})",
        list(zip(*(data[c] for c in cols), strict=True)),
    )
    db, shift = follow._side_db(duckdb.connect(), side), follow.SIDE_ROWID
    got, want = follow._layers(db, shift, shift + n), follow._layers(con, 0, n)
    for key in ("sums", "splits", "last"):
        assert sorted(got[key], key=repr) == sorted(want[key], key=repr), key
    assert sorted((s, a - shift, b - shift) for s, a, b in got["rowids"]) == sorted(want["rowids"])
    store = follow.RunFollow(tmp_path)
    store._side_dbs[(0, "layers")] = db
    for step, lo, hi in got["rowids"][:5]:
        assert sorted(store.step_layers(0, lo, hi, step)) == sorted(
            con.execute(
                "SELECT layer, duration_ns, syncs, splits_used, splits_deserved FROM layers "
                "WHERE step = ?", (step,)
            ).fetchall()
        )  # fmt: skip

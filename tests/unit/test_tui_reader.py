"""The dashboard's update worker: what it draws is the analysis' summary of the committed rows
(never its own aggregate), ranks stay apart, and broken runs give one message."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from mlaprof.analysis.run_summary import build_summary
from mlaprof.store import create_run, load
from mlaprof.synthetic.dashboard import make_run, meta, write_step
from mlaprof.tui import text
from mlaprof.tui.follower import FollowError, RunFollower
from mlaprof.tui.view import PROVISIONAL
from tests.trace_io_helpers import DATA


def _full(run_path: Path):  # noqa: ANN202
    with load(run_path) as run:
        return build_summary(run)


def test_the_view_draws_the_analysis_layer_rows_per_rank(tmp_path: Path) -> None:
    p = make_run(tmp_path, "bug", steps=9, layers=4, ranks=2)
    f = RunFollower(p)
    n = f.poll()
    with load(p) as run:
        total = sum(run.count(t) for t in ("steps", "layers", "syncs", "splits", "padding"))
    assert n >= total
    v = f.view()
    # every rank's rows, never one merged row per layer (the header said "18 steps")
    assert v.rank_label == "ranks 0-1" and v.steps_text == "9 steps per rank (2 ranks)"
    want = {(r.rank, r.layer): r for r in _full(p).layers}
    got = {(r.rank, r.layer): r for r in v.layers}
    assert set(got) == set(want) and len(got) == 8
    for k, r in want.items():  # the summary's typed rows, as they are (never copied to dicts)
        assert got[k] == r
    assert text.layer_table(v)[0][0] == "rank"
    v1 = f.view(rank=1)
    assert {r.rank for r in v1.layers} == {1} and text.layer_table(v1)[0][0] == "layer"
    assert v1.steps_text == "9 steps" and v1.rank_label == "rank 1 of 2"


def test_steps_per_rank_name_the_ranks_behind_each_count(tmp_path: Path) -> None:
    w0 = create_run(tmp_path, "mr", meta("mr", True), rank=0)
    w1 = create_run(tmp_path, "mr", meta("mr", True), rank=1)
    for s in range(5):
        write_step(w0, s, 2, True)
    for s in range(3):
        write_step(w1, s, 2, True)
    f = RunFollower(tmp_path / "mr")
    f.poll()
    v = f.view()
    assert v.steps_text == "3-5 steps per rank (ranks 0: 5, 1: 3)"
    # the latency line says whose step times it draws
    assert v.latency_scope == "rank 0 of 2" and len(v.latency_ms) == 5
    w0.finish()
    w1.finish()


def test_incremental_poll_reads_only_new_rows(tmp_path: Path) -> None:
    w = create_run(tmp_path, "live", meta("live", True))
    f = RunFollower(tmp_path / "live")
    f.poll()  # the rank's status (running) is the only news
    assert f.poll() == 0
    v = f.view()
    assert v.steps == 0 and v.layers == [] and v.status == "running"
    assert v.findings_source == PROVISIONAL
    for s in range(3):
        write_step(w, s, 2, True)
    first = f.poll()
    assert first > 0
    assert f.poll() == 0  # nothing new
    write_step(w, 3, 2, True)
    assert 0 < f.poll() < first
    f.summarise()
    v = f.view()
    assert v.steps == 4
    assert f.step_ids(None) == [0, 1, 2, 3]
    w.finish()
    f.poll()
    f.summarise()
    assert f.view().status == "finished"
    want = {r.layer: r.syncs for r in _full(tmp_path / "live").layers}
    assert {r.layer: r.syncs for r in f.view().layers} == want


def test_step_layers_match_the_step(tmp_path: Path) -> None:
    p = make_run(tmp_path, "bug", steps=6, layers=3)
    f = RunFollower(p)
    f.poll()
    with load(p) as run:
        df = run.layers
    rows = {r.layer: r for r in f.step_layers(4, None)}
    want = df[df["step"] == 4]
    assert len(rows) == len(want) == 3
    for _, r in want.iterrows():
        assert rows[r.layer].time_us == pytest.approx(r.duration_ns / 1e3)
        assert rows[r.layer].S_used == r.splits_used
    v = f.view(step=4)
    assert v.layer_scope == "step 4"
    assert {r.layer: r for r in v.layers} == rows


def test_sort_layers(tmp_path: Path) -> None:
    f = RunFollower(make_run(tmp_path, "bug", steps=3, layers=5))
    f.poll()
    times = [r.time_us for r in f.view(layer_sort=("time_us", True)).layers]
    assert times == sorted(times, reverse=True)
    assert [r.layer for r in f.view().layers] == [0, 1, 2, 3, 4]


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
    # each rank's one step, never summed into "2 steps"
    assert f.view().steps == 1 and f.view().steps_text == "1 step per rank (2 ranks)"
    w0.finish()
    w1.finish()


def test_a_provisional_summary_first_then_the_full_pass_replaces_it(tmp_path: Path) -> None:
    import threading
    import time

    from mlaprof.tui.follower import follow

    w = create_run(tmp_path, "live", meta("live", True))
    for s in range(3):
        write_step(w, s, 2, True)
    f = RunFollower(tmp_path / "live")
    f.poll()
    v = f.view()  # before any full pass: the fold of the committed rows, said so
    assert v.findings and v.findings_source == PROVISIONAL and v.provisional
    # no capture recorded: the fallback is a prediction, never the mode that ran
    assert v.capture.startswith("FULL -> predicted-fail (would run PIECEWISE"), v.capture
    stop, paused = threading.Event(), threading.Event()
    drawn: list = []
    t = threading.Thread(
        target=follow,
        args=(f, drawn.append, lambda _t: None, stop, paused, 0.02, 0.05),
        daemon=True,
    )
    t.start()

    def wait(cond) -> None:  # noqa: ANN001
        deadline = time.monotonic() + 20
        while not cond():
            assert time.monotonic() < deadline, "the full pass never came in"
            time.sleep(0.02)

    try:
        wait(lambda: f.full is not None)
        wait(lambda: drawn and drawn[-1] is not None and not drawn[-1].provisional)
        assert drawn[-1].summary.timing.steps == 3
        for s in range(3, 6):  # the run grows: a newer provisional summary replaces it
            write_step(w, s, 2, True)
        wait(lambda: drawn[-1].summary.timing.steps == 6)
        wait(lambda: f.full.timing.steps == 6)  # and so does a later full pass
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
        while f.full is None:
            assert time.monotonic() < deadline, "the first analysis never started"
            time.sleep(0.05)
    finally:
        stop.set()
        t.join(5)


def test_imported_side_files_are_handed_out_once_as_the_reader_reads_them(
    tmp_path: Path,
) -> None:
    """An import keeps its layers in Parquet side files: the store hands each rank's rows out
    once, equal to the reader's rows of that rank (the run's own table is the oracle), and the
    dashboard waits for the full pass of an imported trace (its evidence is more than rows)."""
    from mlaprof.importers.rocprof import import_rocprof
    from mlaprof.store import follow

    run_dir, _ = import_rocprof(DATA / "aiter" / "fleet_dp2_tp4", tmp_path, "fleet")
    store = follow.RunFollow(run_dir)
    keys = store.discover()
    assert len(keys) == 8
    with load(run_dir) as run:
        layers = run.layers
    for key in keys:
        side = [b for b in store.new_rows(key, 10**9) if b.lo >= follow.SIDE_ROWID]
        got = next(b.frame for b in side if b.table == "layers")
        want = layers[layers["rank"] == key[0]].reset_index(drop=True)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False)
        assert not [b for b in store.new_rows(key, 10**9) if b.lo >= follow.SIDE_ROWID]
    store.close()
    f = RunFollower(run_dir)
    f.poll()
    v = f.view()
    assert v.findings_source == "trace runs: waiting for the full analysis" and not v.layers


def test_a_provisional_summary_is_built_outside_the_followers_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big run's summary takes seconds: polling and drawing (which take the lock) go on."""
    import threading

    from mlaprof.analysis.live import LiveFold

    p = make_run(tmp_path, "r", steps=3, layers=2)
    f = RunFollower(p)
    f.poll()
    started, go = threading.Event(), threading.Event()
    real = LiveFold.provisional

    def slow(self: LiveFold):  # noqa: ANN202
        started.set()
        go.wait(600)  # released by the test below; the bound only guards a hang
        return real(self)

    monkeypatch.setattr(LiveFold, "provisional", slow)
    t = threading.Thread(target=f.summarise, daemon=True)
    t.start()
    assert started.wait(600)  # an event; the bound only guards a hang
    try:
        # free now, whatever the load: a held lock would refuse at once
        assert f.lock.acquire(blocking=False), "the summary holds the follower's lock"
        f.lock.release()
        assert f.poll() == 0  # polling goes on
    finally:
        go.set()
        t.join(10)
    assert f.latest is not None and f.latest.summary is not None

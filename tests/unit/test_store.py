"""Run store: round trip, live reading, schema checks, corruption, (SIGKILL crash safety: tests/e2e/test_store_crash.py)."""

import json
import sqlite3
from pathlib import Path

import pytest

import mlaprof
from mlaprof.errors import MlaprofError
from mlaprof.store import create_run, list_runs, load
from mlaprof.store.schema import SCHEMA_VERSION


def _writer(traces, name="r", rank=0):
    return create_run(traces, name, {"scenario": {"name": "t"}, "backend": "torch"}, rank=rank)


def test_round_trip_and_dataframes(traces):
    w = _writer(traces)
    w.add("steps", step=0, duration_ns=1234567890123, graph_mode="FULL")
    w.add_many("layers", [{"step": 0, "layer": i, "duration_ns": 10 + i} for i in range(5)])
    w.add("syncs", step=0, layer=1, kind="sync", op="aten.nonzero", location="a.py:3")
    w.finish()
    run = mlaprof.load(w.run_dir)
    assert run.steps["duration_ns"].tolist() == [1234567890123]  # exact int64
    assert run.layers["layer"].tolist() == [0, 1, 2, 3, 4]
    assert run.syncs.iloc[0]["location"] == "a.py:3"
    assert run.status == "finished" and run.ranks == [0]
    assert not (w.run_dir / "rank0.db-wal").exists()  # folded into one file on finish
    with pytest.raises(MlaprofError, match="no column"):
        _writer(traces, "other").add("steps", colour=1)


def test_reader_sees_records_while_writing(traces):
    w = _writer(traces)
    run = load(w.run_dir)
    assert run.count("steps") == 0 and run.status == "running"
    w.add("steps", step=0)
    assert run.count("steps") == 1
    w.add("steps", step=1)
    assert run.steps["step"].tolist() == [0, 1]
    w.finish()


def test_multi_rank_runs(traces):
    w0, w1 = _writer(traces), _writer(traces, rank=1)
    w0.add("steps", step=0)
    w1.add("steps", step=0)
    w0.finish()
    w1.finish()
    run = load(w0.run_dir)
    assert sorted(run.steps["rank"].tolist()) == [0, 1]
    with pytest.raises(MlaprofError, match="already exists"):
        _writer(traces, rank=1)


def test_schema_version_checked(traces):
    w = _writer(traces)
    w.finish()
    meta = json.loads((w.run_dir / "run.json").read_text())
    meta["schema_version"] = SCHEMA_VERSION + 1
    (w.run_dir / "run.json").write_text(json.dumps(meta))
    with pytest.raises(MlaprofError, match="schema version"):
        load(w.run_dir)
    meta["schema_version"] = SCHEMA_VERSION
    (w.run_dir / "run.json").write_text(json.dumps(meta))
    con = sqlite3.connect(w.run_dir / "rank0.db")
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    con.commit()
    con.close()
    with pytest.raises(MlaprofError, match="schema version"):
        load(w.run_dir)


def test_corrupt_and_missing(traces):
    with pytest.raises(MlaprofError, match="does not exist"):
        load(traces / "nope")
    w = _writer(traces)
    w.add("steps", step=0)
    w.finish()
    db = w.run_dir / "rank0.db"
    before = db.read_bytes()
    db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(MlaprofError, match="rank0.db"):
        load(w.run_dir)
    db.write_bytes(before)
    assert load(w.run_dir).count("steps") == 1
    (w.run_dir / "run.json").write_text("{broken")
    with pytest.raises(MlaprofError, match="corrupt"):
        load(w.run_dir)
    listed = list_runs(traces)
    assert listed[0].status == "unreadable" and "corrupt" in listed[0].error
    # its step count is unknown, never "0 steps" (it recorded one)
    assert listed[0].steps is None and listed[0].steps_text("steps") == "unknown"


def test_a_copy_without_git_history_records_the_revision_it_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlaprof.store import runmeta

    # the env var wins over any enclosing checkout (a device machine's copy sits inside another
    # tree, whose revision would be wrong); no git process is asked (the unit tier refuses one)
    monkeypatch.setenv(runmeta.GIT_REVISION_ENV, "0123456789ab")
    assert runmeta._git_revision() == "0123456789ab"
    monkeypatch.setenv(runmeta.GIT_REVISION_ENV, "nonsense; rm -rf")
    with pytest.raises(MlaprofError, match="is not a git revision"):
        runmeta._git_revision()


def test_a_finished_run_whose_database_is_gone_is_damaged_not_abandoned(tmp_path: Path) -> None:
    """A finished run with its database deleted read "an empty run abandoned before its first
    record" (report), "no readable rank databases yet" (TUI) and "abandoned" (runs): one
    story now, in the reader every view opens runs with."""
    traces = tmp_path / "t"
    w = create_run(traces, "r", {"source": "test"})
    w.add("steps", step=0, t_start_ns=1, duration_ns=2, graph_mode="FULL")
    w.finish()
    (w.run_dir / "rank0.db").unlink()
    with pytest.raises(MlaprofError, match="says it finished but holds no rank database"):
        load(w.run_dir)
    (info,) = list_runs(traces)
    assert info.status == "unreadable" and "says it finished" in (info.error or "")
    assert info.steps_text() == "unknown"

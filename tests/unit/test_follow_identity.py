"""The live follower follows a run, not a name: a run deleted and recorded again under the same
name (same folder, same rank<N>.db) is noticed by its identity (run.json's run id, the folder's
and each database's inode) and followed from nothing, never shown as the old run nor added to
its counts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlaprof.store.follow import RunFollow, RunReplaced
from mlaprof.synthetic.dashboard import make_run
from mlaprof.tui.follower import RunFollower


def _read(f: RunFollower) -> tuple[int, int, str]:
    f.catch_up()
    v = f.view()
    return v.steps, len({r.layer for r in v.layers}), f.fold.status


def test_a_run_replaced_under_the_follower_is_followed_afresh(tmp_path: Path) -> None:
    p = make_run(tmp_path, "r", steps=50, layers=7)
    f = RunFollower(p)
    assert _read(f) == (50, 7, "finished")
    old_id = json.loads((p / "run.json").read_text())["run_id"]
    shutil.rmtree(p)
    make_run(tmp_path, "r", steps=20, layers=3)
    assert json.loads((p / "run.json").read_text())["run_id"] != old_id
    # what the disk holds: 20 steps of 3 layers (not the old 50 x 7, nor 70 added up)
    assert _read(f) == (20, 3, "finished")
    assert f.generation == 1
    f.close()


def test_a_rank_database_replaced_in_place_is_noticed(tmp_path: Path) -> None:
    # only the database changed (same folder, same run.json): its inode says it is another file
    p = make_run(tmp_path, "a", steps=9, layers=2)
    make_run(tmp_path, "b", steps=4, layers=2)
    store = RunFollow(p)
    assert store.exists() and store.discover() == [(0, "")]
    store.state((0, ""))
    (p / "rank0.db").unlink()
    shutil.copy(tmp_path / "b" / "rank0.db", p / "rank0.db")
    with pytest.raises(RunReplaced, match="rank0.db of run a was replaced"):
        store.state((0, ""))
    store.close()


def test_run_json_of_another_run_is_noticed(tmp_path: Path) -> None:
    # inodes can be reused once a folder is deleted: run.json's run id still tells the runs apart
    p = make_run(tmp_path, "a", steps=3, layers=2)
    store = RunFollow(p)
    assert store.read_meta(had=False) is not None and not store.meta_changed()
    doc = json.loads((p / "run.json").read_text())
    (p / "run.json").write_text(json.dumps({**doc, "run_id": "another"}))
    assert store.meta_changed()
    with pytest.raises(RunReplaced):
        store.read_meta(had=True)
    store.close()

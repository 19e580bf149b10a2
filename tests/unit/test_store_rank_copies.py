"""A staged import's ranks after the first are copies of the first's empty database
(mlaprof.store.writer.copy_finished), not built again: the same schema, pragmas and header as a
database the store's writer builds, their own start and finish times, no record of the rank
they were copied from."""

from __future__ import annotations

import itertools
import sqlite3
import types
from pathlib import Path

import pytest

from mlaprof.errors import MlaprofError
from mlaprof.store import load, writer
from mlaprof.store.staging import staged_run

PRAGMAS = ("journal_mode", "page_size", "auto_vacuum", "encoding", "user_version", "page_count")


def _describe(db: Path) -> dict:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {
            "schema": con.execute("SELECT * FROM sqlite_master ORDER BY rowid").fetchall(),
            "meta": con.execute("SELECT key FROM meta ORDER BY rowid").fetchall(),
            "status": con.execute("SELECT value FROM meta WHERE key = 'status'").fetchone(),
            "steps": con.execute("SELECT COUNT(*) FROM steps").fetchone()[0],
            **{p: con.execute(f"PRAGMA {p}").fetchone()[0] for p in PRAGMAS},
        }
    finally:
        con.close()
    header = bytearray(db.read_bytes()[:100])
    header[24:28] = header[92:96] = bytes(4)  # change counters
    return {**out, "header": bytes(header)}


def _times(db: Path) -> tuple[float, float]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    got = dict(con.execute("SELECT key, value FROM meta WHERE key IN ('started', 'finished')"))
    con.close()
    return float(got["started"]), float(got["finished"])


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """time.time() in the writer counts 1, 2, 3...: every reading distinct."""
    tick = itertools.count(1)
    monkeypatch.setattr(writer, "time", types.SimpleNamespace(time=lambda: float(next(tick))))


def test_copied_ranks_are_the_writer_s_database(tmp_path: Path, clock: None) -> None:
    built = writer.create_run(tmp_path / "ref", "ref", {})
    built.finish("finished")
    ref = writer.RunWriter(built.run_dir, 5)
    ref.finish("finished")
    want = _describe(ref.db_path)
    assert want["journal_mode"] == "delete" and want["status"] == ("finished",)
    with staged_run(tmp_path, "run", {"source": "test"}) as (bulk, final):
        first = bulk.rank_writer(1)  # built by the writer; the others copied
        first.insert_dicts("steps", [{"step": 0}, {"step": 1}])
        for r in (2, 3):
            bulk.rank_writer(r).insert_dicts("steps", [{"step": 7}])
    for r in (1, 2, 3):
        got = _describe(final / f"rank{r}.db")
        assert {k: v for k, v in got.items() if k != "steps"} == {
            k: v for k, v in want.items() if k != "steps"
        }
        assert got["steps"] == (2 if r == 1 else 1)  # nothing of rank 1's copied
        assert (final / f"rank{r}.lock").exists()
    times = [_times(final / f"rank{r}.db") for r in (1, 2, 3)]
    assert all(s < f for s, f in times)  # each rank's own
    assert len({t for pair in times for t in pair}) == 6
    assert not [p.name for p in final.iterdir() if p.name.startswith(".")]
    with load(final) as run:
        assert run.steps.groupby("rank")["step"].apply(list).to_dict() == {
            1: [0, 1],
            2: [7],
            3: [7],
        }


def test_a_copy_never_replaces_a_rank(tmp_path: Path) -> None:
    w = writer.create_run(tmp_path, "run", {})
    w.finish("finished")
    blank = w.db_path.read_bytes()
    writer.copy_finished(blank, w.run_dir, 1)
    with pytest.raises(MlaprofError, match="refusing to overwrite"):
        writer.copy_finished(blank, w.run_dir, 1)

"""Run folders that cannot lie: a rank database copied in under another number, a deleted rank
database of a multi-rank import, a rank database linked from outside the folder. Each is refused
with one line that names the file (``report``, ``report --json``, ``tui --once``, ``runs``,
the live follower), never a traceback, a silently smaller run or a file read from elsewhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.importers.rocprof import import_rocprof
from mlaprof.store import load
from mlaprof.store.follow import FollowError, RunFollow
from tests import shipped_demo
from tests.trace_io_helpers import replay_kernel_csv

ROOT = Path(__file__).resolve().parents[2]
DEMO = shipped_demo.run("fix-native-kernel-full-graph")  # a copy: tests never touch traces/


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-rank import with MLA layers on both ranks (rocprofv3's <pid>_kernel_trace.csv)."""
    tmp = tmp_path_factory.mktemp("two")
    for pid, agent in ((100, 2), (300, 3)):
        p = tmp / "out" / "host" / f"{pid}_kernel_trace.csv"
        p.parent.mkdir(parents=True, exist_ok=True)
        replay_kernel_csv(p, replays=2, layers=3, splits=8)
        p.write_text(p.read_text().replace('"Agent 2"', f'"Agent {agent}"'))
    run, _ = import_rocprof(tmp / "out", tmp / "t", "fleet")
    assert load(run).ranks == [0, 1]
    return run


def _copy(run: Path, tmp_path: Path, name: str = "r") -> Path:
    dst = tmp_path / "t" / name
    shutil.copytree(run, dst, symlinks=True)
    return dst


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> None:
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert "Traceback" not in cap.err and len(err.splitlines()) == 1, err
    assert err.startswith("mlaprof: error:"), err
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("cmd", [[], ["--json"], ["--format", "md"]])
def test_a_rank_database_copied_under_another_number_is_refused(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: list[str]
) -> None:
    run = _copy(two_ranks, tmp_path)
    shutil.copy(run / "rank1.db", run / "rank7.db")
    _refused(["report", str(run), *cmd], capsys, "rank7.db", "rank 1")


def test_a_renamed_rank_database_of_a_live_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a recorded run keeps its rows in SQLite: the rows' rank is what disagrees with the name
    run = _copy(DEMO, tmp_path)
    (run / "rank0.db").rename(run / "rank3.db")
    _refused(["report", str(run), "--json"], capsys, "rank3.db", "rank 0")
    _refused(["tui", str(run), "--once"], capsys, "rank3.db")
    with pytest.raises(FollowError, match="rank3.db holds rank 0"):
        RunFollow(run).discover()


def test_a_deleted_rank_database_is_named_not_a_smaller_run(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(two_ranks, tmp_path)
    assert json.loads((run / "run.json").read_text())["ranks"] == [0, 1]
    (run / "rank1.db").unlink()
    _refused(["report", str(run)], capsys, "missing rank1.db")
    _refused(["report", str(run), "--json"], capsys, "missing rank1.db")
    assert main(["runs", str(tmp_path / "t")]) == 0
    # the listing wraps at the terminal's width wherever the folder's path puts the words
    assert "missing rank1.db" in " ".join(capsys.readouterr().out.split())


def test_an_import_from_before_the_ranks_were_recorded_still_names_its_missing_rank(
    two_ranks: Path, tmp_path: Path
) -> None:
    # run.json without ``ranks``: the columnar files' rank=<N> partitions still say it
    run = _copy(two_ranks, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    del meta["ranks"]
    (run / "run.json").write_text(json.dumps(meta))
    (run / "rank1.db").unlink()
    with pytest.raises(MlaprofError, match="missing rank1.db"):
        load(run)


def test_a_linked_rank_database_is_never_read(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _copy(two_ranks, tmp_path)
    outside = tmp_path / "elsewhere.db"
    (run / "rank1.db").rename(outside)
    (run / "rank1.db").symlink_to(outside)
    _refused(["report", str(run), "--json"], capsys, "rank1.db is a symbolic link")
    with pytest.raises(FollowError, match="symbolic link"):
        RunFollow(run).discover()
    # a linked WAL is the same file read from elsewhere
    run2 = _copy(DEMO, tmp_path, "w")
    (tmp_path / "x-wal").write_bytes(b"")
    (run2 / "rank0.db-wal").symlink_to(tmp_path / "x-wal")
    with pytest.raises(MlaprofError, match="rank0.db-wal is a symbolic link"):
        load(run2)


def test_an_intact_run_still_opens(two_ranks: Path) -> None:
    with load(two_ranks) as r:
        assert r.ranks == [0, 1]
    f = RunFollow(two_ranks)
    assert f.discover() == [(0, ""), (1, "")]
    f.close()


def test_a_rank_database_the_run_did_not_record_is_refused(
    two_ranks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rank 2's own records, from another run: its rows and files agree with its name, but this
    # run recorded ranks 0-1 (run.json), so they would be read as a third rank of this one
    from mlaprof.store.writer import create_run

    w = create_run(tmp_path / "other", "o", {"source": "test"}, rank=2)
    w.add("steps", step=0)
    w.finish()
    run = _copy(two_ranks, tmp_path)
    shutil.copy(tmp_path / "other" / "o" / "rank2.db", run / "rank2.db")
    for cmd in ([], ["--json"]):
        _refused(["report", str(run), *cmd], capsys, "rank2.db", "did not record", "ranks 0-1")
    _refused(["tui", str(run), "--once"], capsys, "rank2.db", "did not record")
    with pytest.raises(MlaprofError, match="rank2.db, which the run did not record"):
        load(run)
    # a live run names no ranks in run.json: its ranks join as they start
    meta = json.loads((run / "run.json").read_text())
    del meta["ranks"]
    (run / "run.json").write_text(json.dumps(meta))
    assert load(run).ranks == [0, 1, 2]

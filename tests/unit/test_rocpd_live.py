"""A rocpd database still being written is read as one committed state or refused as changing,
never as a state no commit had, never called malformed. The writer here is a second SQLite
connection in this process appending 54 dispatch rows per commit (rocprofv3's writer commits in
batches), made to write at the worst instant: between the two file copies the reader used to
make, and in the middle of a query on the file read in place."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from mlaprof.cli import main
from mlaprof.errors import MlaprofError
from mlaprof.importers import rocpd_sqlite
from mlaprof.store import load
from tests.conformance.rocpd import write_rocpd
from tests.conformance.shapes import graph_replays

BATCH = 54


class Writer:
    """rocprofv3 still appending: copies of existing dispatch rows under new ids, 54 a commit."""

    def __init__(self, db: Path) -> None:
        self.con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        self.con.execute("PRAGMA wal_autocheckpoint=0")
        (self.table,) = self.con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_kernel_dispatch_%'"
        ).fetchone()
        self.counts = [self.count()]  # the dispatch count of every commit

    def count(self) -> int:
        return self.con.execute(f'SELECT COUNT(*) FROM "{self.table}"').fetchone()[0]

    def pages(self) -> int:
        return self.con.execute("PRAGMA page_count").fetchone()[0]

    def commit(self, checkpoint: str = "", rows: int = BATCH, offset: int = 0) -> None:
        cols = [r[1] for r in self.con.execute(f'PRAGMA table_info("{self.table}")')]
        rest = ", ".join(f'"{c}"' for c in cols if c != "id")
        top = self.con.execute(f'SELECT MAX(id) FROM "{self.table}"').fetchone()[0]
        self.con.execute("BEGIN")
        self.con.execute(
            f'INSERT INTO "{self.table}" (id, {rest}) SELECT id + ?, {rest} FROM "{self.table}" '
            f"ORDER BY id LIMIT ? OFFSET ?",
            (top, rows, offset),
        )
        self.con.execute("COMMIT")
        self.counts.append(self.count())
        if checkpoint:
            self.con.execute(f"PRAGMA wal_checkpoint({checkpoint})")


@pytest.fixture
def live(tmp_path: Path) -> tuple[Path, Writer]:
    db = write_rocpd(graph_replays(6, 9), tmp_path / "in" / "1_results.db", "3.0.1", wal=True)
    w = Writer(db)
    for _ in range(3):
        w.commit()  # committed frames wait in the -wal (no checkpoint yet)
    assert db.with_name(db.name + "-shm").exists()
    yield db, w
    w.con.close()


def _import(db: Path, traces: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["import", "rocprof", str(db), "--traces", str(traces), "--name", "x"])
    err = capsys.readouterr().err
    if rc != 0:
        return rc, err
    with load(traces / "x") as run:
        return run.count("kernels"), err


def test_a_commit_between_the_copies_never_tears_the_import(
    live: tuple[Path, Writer], tmp_path: Path, monkeypatch, capsys
) -> None:
    db, w = live
    real = shutil.copyfile

    def racing(src, dst, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = real(src, dst, *a, **k)
        if str(src) == str(db):  # the database copied, its -wal not yet: the writer goes on
            w.commit("TRUNCATE")
            w.commit()
        return out

    monkeypatch.setattr(shutil, "copyfile", racing)
    n, err = _import(db, tmp_path / "t", capsys)
    assert "malformed" not in err
    assert n in w.counts, (n, w.counts)  # a state some commit had, never a mixture


def test_a_file_open_by_its_writer_is_never_read_in_place(
    live: tuple[Path, Writer], tmp_path: Path, monkeypatch, capsys
) -> None:
    """The -wal checkpointed empty looks like a complete file, but its writer (its -shm is
    there) may checkpoint into it at any page: an ``immutable`` read of it was refused as
    malformed although the file is sound. It is read through a snapshot instead."""
    db, w = live
    w.commit("TRUNCATE")
    assert db.with_name(db.name + "-wal").stat().st_size == 0
    real = rocpd_sqlite.readable
    uris: list[str] = []

    @contextlib.contextmanager
    def recording(path):  # noqa: ANN001, ANN202
        with real(path) as uri:
            uris.append(uri)
            w.commit("TRUNCATE")  # the writer goes on while every read runs
            yield uri

    monkeypatch.setattr(rocpd_sqlite, "readable", recording)
    n, err = _import(db, tmp_path / "t", capsys)
    assert uris and not [u for u in uris if str(db) in u], uris  # never the live file itself
    assert "malformed" not in err and n in w.counts, (n, err)


def test_a_file_changed_while_read_in_place_is_refused_as_changing(tmp_path: Path, capsys) -> None:
    # no writer open (no -wal, no -shm): read in place; a writer that comes meanwhile is seen
    db = write_rocpd(graph_replays(3, 4), tmp_path / "in" / "1_results.db", "3.0.1", wal=True)
    assert not db.with_name(db.name + "-wal").exists()
    w: list[Writer] = []
    with (
        pytest.raises(MlaprofError, match="changed while it was read"),
        rocpd_sqlite.readable(db) as uri,
    ):
        try:
            con = sqlite3.connect(uri, uri=True)
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            w.append(Writer(db))
            w[0].commit("TRUNCATE")
        finally:
            con.close()
    w[0].con.close()


def test_no_file_is_written_beside_a_database_read_through_a_snapshot(
    live: tuple[Path, Writer], tmp_path: Path, capsys
) -> None:
    db, w = live
    before = sorted(p.name for p in db.parent.iterdir())
    n, _ = _import(db, tmp_path / "t", capsys)
    assert n == w.counts[-1]
    assert sorted(p.name for p in db.parent.iterdir()) == before


def _race(db: Path, w: Writer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The writer lands inside the snapshot, whatever way it reads the live file: before every
    Python open of the database or its -wal (a file copy's reads: it commits, checkpoints the
    -wal into the database and commits again), right after an SQLite connection to the live
    file opens, and once in the middle of each statement on it (commits, passive checkpoint:
    a reader's snapshot stays readable). Same thread, no sleeps: deterministic. Returns where
    it landed."""
    import builtins
    import os

    live = {os.path.abspath(db), os.path.abspath(str(db) + "-wal")}
    landed: list[str] = []
    real_open, real_os_open, real_connect = builtins.open, os.open, sqlite3.connect

    def is_live(file: object) -> bool:
        return isinstance(file, (str, os.PathLike)) and os.path.abspath(os.fspath(file)) in live

    def opening(file, mode="r", *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if is_live(file) and "r" in mode:
            landed.append(f"open {Path(os.fspath(file)).name}")
            w.commit("TRUNCATE")
            w.commit()
        return real_open(file, mode, *a, **k)

    def os_opening(path, flags, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if is_live(path) and not flags & (os.O_WRONLY | os.O_RDWR):
            landed.append(f"os.open {Path(os.fspath(path)).name}")
            w.commit("TRUNCATE")
            w.commit()
        return real_os_open(path, flags, *a, **k)

    def connecting(database, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        con = real_connect(database, *a, **k)
        name = str(database).removeprefix("file:").split("?")[0]
        if is_live(name.replace("%20", " ")) or str(db) in str(database):
            landed.append("sqlite connect")
            w.commit("TRUNCATE")
            w.commit()
            fired: list[bool] = []

            def mid_statement() -> int:
                if not fired:
                    fired.append(True)
                    landed.append("mid statement")
                    w.commit("PASSIVE")
                return 0

            con.set_progress_handler(mid_statement, 100)
        return con

    monkeypatch.setattr(builtins, "open", opening)
    monkeypatch.setattr(os, "open", os_opening)
    monkeypatch.setattr(sqlite3, "connect", connecting)
    return landed


def _committed_or_refused(db: Path, traces: Path, w: Writer, capsys) -> None:  # noqa: ANN001
    """The import stores a dispatch count some commit had, or is refused as changing."""
    rc = main(["import", "rocprof", str(db), "--traces", str(traces), "--name", "x"])
    err = capsys.readouterr().err
    assert "malformed" not in err, err
    if rc != 0:
        assert "changed while it was read" in err or "consistent snapshot" in err, err
        return
    with load(traces / "x") as run:
        n = run.count("kernels")
    assert n in w.counts, (n, w.counts)  # a state some commit had, never a mixture


def _two_step_copy(path: Path, dest: Path) -> str:
    """The importer's snapshot before: the database copied, then its -wal."""
    shutil.copyfile(path, dest)
    shutil.copyfile(str(path) + "-wal", str(dest) + "-wal")
    return f"file:{dest}?mode=ro"


def test_the_race_tears_a_two_step_copy(
    live: tuple[Path, Writer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The race above catches the harm: a snapshot made as a copy of the database and then of
    its -wal (the importer before) stores a count no commit had, or is called malformed."""

    from mlaprof.store import validate

    db, w = live
    monkeypatch.setattr(rocpd_sqlite, "_backup", _two_step_copy)
    # nor the importers' boundary that now refuses any failing input that moved while it was
    # read (mlaprof.store.validate.decoding): the importer before had neither
    monkeypatch.setattr(validate, "_refuse_if_live", lambda *_: None)
    landed = _race(db, w, monkeypatch)
    with pytest.raises(AssertionError):
        _committed_or_refused(db, tmp_path / "t", w, capsys)
    assert {"open 1_results.db", "open 1_results.db-wal"} <= set(landed), landed


def _split_page(w: Writer) -> None:
    """Commits that leave a database copied before them and its -wal copied after them a
    readable mixture: single dispatches until the table takes one new page (they fill the last
    page), checkpointed into the database, then a 54-dispatch commit in the -wal. The -wal
    holds the new page and the table's interior page as they are now, the copied database the
    filled page as it was: a sound-looking file whose count no commit had."""
    pages, i = w.pages(), 0
    while w.pages() == pages:
        i += 1
        w.commit(rows=1, offset=i)  # another record each (the import keeps a repeat once)
    w.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    w.commit()


def _split_race(db: Path, w: Writer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """:func:`_split_page` lands once, at the first read of the live -wal (a copy's second
    step) or the first SQLite connection to the live database (a snapshot). Same thread, no
    sleeps. Returns where it landed."""
    import builtins

    wal = str(db) + "-wal"
    landed: list[str] = []
    real_open, real_connect = builtins.open, sqlite3.connect

    def land(where: str) -> None:
        if not landed:
            landed.append(where)
            _split_page(w)

    def opening(file, mode="r", *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        if isinstance(file, (str, Path)) and str(file) == wal and "r" in mode:
            land("open -wal")
        return real_open(file, mode, *a, **k)

    def connecting(database, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        con = real_connect(database, *a, **k)
        if str(db) in str(database).replace("%20", " "):
            land("sqlite connect")
        return con

    monkeypatch.setattr(builtins, "open", opening)
    monkeypatch.setattr(sqlite3, "connect", connecting)
    # the database file holds every commit but one, which waits in the -wal
    w.commit("TRUNCATE")
    w.commit(rows=1)
    return landed


@pytest.mark.parametrize(
    ("race", "only_on_connect"),
    [
        # a writer landing at every open and connection of the snapshot's read
        pytest.param(_race, False, id="race"),
        # single dispatches until the table takes a new page, then a commit splitting it, landing
        # on the snapshot's SQLite connection
        pytest.param(_split_race, True, id="split_race"),
    ],
)
def test_a_commit_landing_inside_the_snapshot_never_tears_the_import(
    live: tuple[Path, Writer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys,  # noqa: ANN001
    race: Callable[[Path, Writer, pytest.MonkeyPatch], list[str]],
    only_on_connect: bool,
) -> None:
    db, w = live
    landed = race(db, w, monkeypatch)
    _committed_or_refused(db, tmp_path / "t", w, capsys)
    # the writer did land while the snapshot read the file
    if only_on_connect:
        assert landed == ["sqlite connect"], (landed, w.counts)
    else:
        assert "sqlite connect" in landed


def test_a_two_step_copy_stores_a_count_no_commit_had(
    live: tuple[Path, Writer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The silent form of the harm, which the test above catches: the database copied, then
    its -wal, with the commits of :func:`_split_page` between the two copies, imports with exit
    0 and a kernel count that no commit had, the file never called malformed."""

    db, w = live
    monkeypatch.setattr(rocpd_sqlite, "_backup", _two_step_copy)
    landed = _split_race(db, w, monkeypatch)
    rc = main(["import", "rocprof", str(db), "--traces", str(tmp_path / "t"), "--name", "x"])
    err = capsys.readouterr().err
    assert rc == 0 and "malformed" not in err, err
    with load(tmp_path / "t" / "x") as run:
        n = run.count("kernels")
    assert landed == ["open -wal"]
    assert n not in w.counts and w.counts[0] < n < w.counts[-1], (n, w.counts)

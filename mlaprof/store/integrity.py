"""A run folder's files agree with each other, or the run is refused in one line.

A run folder is a user's folder: files get copied in under another number (``rank7.db`` =
``rank1.db``), deleted (``rank1.db`` of a 2-rank import), renamed or replaced by links. Each of
those read as data would give a traceback (two ranks' rows under one number), a silently smaller
run, or records from outside the folder. The checks here are the one rule the reader
(:class:`mlaprof.store.reader.Run`) and the live follower (:class:`mlaprof.store.follow.RunFollow`)
apply on open:

- a rank database is a plain file of the folder (never a symbolic link, nor its ``-wal``);
- its rows and columnar files are the rank its name says (every row carries its writer's rank,
  every file sits under ``rank=<N>/``);
- every rank the run names is there: the ranks an import recorded in run.json (``ranks``) and
  the ranks of its columnar files (``kernels/host=<h>/rank=<N>/``); and no other (a database
  the recorded ``ranks`` do not name was copied in from elsewhere);
- rank databases come with their run.json, and a run.json that says the run ended comes with its
  databases (:func:`check_run`, the folder-level rule every command reaches through the reader or
  the follower).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import plural, rank_span
from mlaprof.store import liveness

_PARTITION = re.compile(r"^rank=(\d+)$")
# the tables whose rows say their rank and which every writer fills first
_RANKED = ("steps", "layers")


def check_file(path: Path) -> None:
    """A rank database (and its WAL) must be a regular file of the run folder, not a link."""
    for p in (path, path.with_name(path.name + "-wal")):
        if p.is_symlink():
            raise MlaprofError(
                f"{p} is a symbolic link (to {_target(p)}): a run reads only its own files; "
                "copy the database into the run folder instead"
            )
    if not path.is_file():
        raise MlaprofError(f"{path} is not a file")


def check_rows(con: sqlite3.Connection, path: Path, rank: int) -> None:
    """The database's rows are rank ``rank``'s (a copied or renamed one holds another's)."""
    for table in _RANKED:
        try:
            row = con.execute(
                f"SELECT rank FROM {table} WHERE rank IS NOT ? LIMIT 1", (rank,)
            ).fetchone()
        except sqlite3.OperationalError:  # a table this schema lacks: nothing to disagree with
            continue
        if row is not None:
            other = row[0]
            raise MlaprofError(
                f"{path} holds rank {other}'s records, not rank {rank}'s: a rank database "
                f"copied or renamed into this run (remove it, or restore it as rank{other}.db)"
            )


def check_sides(sides: Mapping[str, Any], path: Path, rank: int) -> None:
    """The columnar files a rank database names are that rank's (``.../rank=<N>/``)."""
    for side in sides.values():
        for part in Path(side.path).parts:
            m = _PARTITION.match(part)
            if m and int(m.group(1)) != rank:
                other = int(m.group(1))
                raise MlaprofError(
                    f"{path} names rank {other}'s files ({side.table}), not rank {rank}'s: a rank "
                    f"database copied or renamed into this run (remove it, or restore it as "
                    f"rank{other}.db)"
                )


def missing_ranks(run_dir: Path, meta: Mapping[str, Any], present: Collection[int]) -> list[int]:
    """Ranks the run says it has (run.json's ``ranks``, the columnar files' partitions) that
    have no database in the folder."""
    named = (_recorded(meta) or set()) | set(_partition_ranks(run_dir))
    return sorted(named - set(present))


def extra_ranks(meta: Mapping[str, Any], present: Collection[int]) -> list[int]:
    """Ranks with a database in the folder that run.json's ``ranks`` (the ranks an import or
    ``mlaprof run --ranks N`` recorded once it ended) does not name: none where it names none (a
    live run's ranks join as they start)."""
    named = _recorded(meta)
    return [] if named is None else sorted(set(present) - named)


def _recorded(meta: Mapping[str, Any]) -> set[int] | None:
    """run.json's ``ranks`` (None where it names none)."""
    ranks = meta.get("ranks")
    if not isinstance(ranks, list):
        return None
    return {int(r) for r in ranks if isinstance(r, int) and not isinstance(r, bool)}


def check_complete(run_dir: Path, meta: Mapping[str, Any], present: Collection[int]) -> None:
    """Refuse a run missing a rank it names (never read as a silently smaller run), or holding
    a rank database it does not name (never read as a bigger one: a database copied in from
    another run adds that run's records to this one's ranks)."""
    extra = extra_ranks(meta, present)
    if extra:
        names = ", ".join(f"rank{r}.db" for r in extra)
        named = rank_span(_recorded(meta) or ()) or "none"
        raise MlaprofError(
            f"{run_dir} holds {names}, which the run did not record (run.json names ranks "
            f"{named}): a database copied in from another run; move it out of this folder"
        )
    gone = missing_ranks(run_dir, meta, present)
    if gone:
        names = ", ".join(f"rank{r}.db" for r in gone)
        have = rank_span(present) or "none"
        raise MlaprofError(
            f"{run_dir} is missing {names} (the run has ranks {_span(gone, present)}, "
            f"databases for {have}): restore {plural('the file(s)', len(gone))} or re-import the "
            "trace"
        )


def check_not_emptied(run_dir: Path, meta: Mapping[str, Any], present: Collection[int]) -> None:
    """Refuse a run whose run.json says it ended but whose databases are gone (deleted, or not
    copied with it): it is a damaged run, never an "empty run abandoned before its first record"
    or one still "starting"."""
    status = meta.get("status")
    if not present and status in liveness.AFTER_RECORDS:
        raise MlaprofError(
            f"{run_dir} says it {status} but holds no rank database (rank<N>.db): restore the "
            "files or record the run again"
        )


_RANK_DB = re.compile(r"^rank(\d+)(?:\.[a-z]+)?\.db$")  # rank<N>[.<role>].db


def check_run(run_dir: Path, meta: Mapping[str, Any] | None, present: Collection[int]) -> None:
    """The one rule every entry point judges a run folder by, through the reader (on open) and
    the live follower (each time it looks for databases): ``meta`` is run.json (None: the folder
    has none), ``present`` the ranks whose databases opened.

    - rank databases without run.json: not a run anyone can read (its run.json was deleted or
      not copied with it); refused, the files left as they are;
    - a run missing a rank it names: :func:`check_complete`;
    - a run whose run.json says it ended but holds no database: :func:`check_not_emptied`.
    A folder with neither (a run about to write its run.json) passes: a reader refuses it as no
    run, a follower waits for it."""
    if meta is None:
        found = rank_files(run_dir)
        if found:
            raise MlaprofError(
                f"{run_dir} holds {', '.join(found[:4])}{', ...' if len(found) > 4 else ''} but "
                "no run.json: not a readable mlaprof run (its run.json was deleted or not copied "
                "with it); restore run.json from where the run was recorded (nothing was changed)"
            )
        return
    if present:
        check_complete(run_dir, meta, present)
    else:
        check_not_emptied(run_dir, meta, present)


def check_folder(run_dir: Path) -> None:
    """:func:`check_run` on the folder as it lies, before any database is opened: a command
    refuses up front what its reader would refuse (the dashboard never opens on it). run.json is
    read by the store's one reader (a corrupt one is refused there)."""
    from mlaprof.store import runmeta

    run_dir = Path(run_dir)
    meta = runmeta.read(run_dir) if (run_dir / runmeta.META_FILE).is_file() else None
    present = {int(m.group(1)) for n in rank_files(run_dir) if (m := _RANK_DB.match(n))}
    check_run(run_dir, meta, present)


def rank_files(run_dir: Path) -> list[str]:
    """The names of the rank databases in ``run_dir`` (``rank<N>[.<role>].db``), sorted."""
    try:
        return sorted(p.name for p in Path(run_dir).iterdir() if _RANK_DB.match(p.name))
    except OSError:
        return []


def _partition_ranks(run_dir: Path) -> Iterable[int]:
    for table in ("kernels", "layers"):
        base = run_dir / table
        if not base.is_dir():
            continue
        for host in base.iterdir():
            if not host.is_dir() or not host.name.startswith("host="):
                continue
            for part in host.iterdir():
                m = _PARTITION.match(part.name)
                if m:
                    yield int(m.group(1))


def _span(gone: Iterable[int], present: Iterable[int]) -> str:
    return rank_span(set(gone) | set(present))


def _target(p: Path) -> str:
    try:
        return str(p.readlink())
    except OSError:
        return "?"

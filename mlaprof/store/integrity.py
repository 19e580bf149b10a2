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
  the ranks of its columnar files (``kernels/host=<h>/rank=<N>/``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import rank_span
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
    named: set[int] = set()
    ranks = meta.get("ranks")
    if isinstance(ranks, list):
        named |= {int(r) for r in ranks if isinstance(r, int) and not isinstance(r, bool)}
    named |= set(_partition_ranks(run_dir))
    return sorted(named - set(present))


def check_complete(run_dir: Path, meta: Mapping[str, Any], present: Collection[int]) -> None:
    """Refuse a run missing a rank it names (never read as a silently smaller run)."""
    gone = missing_ranks(run_dir, meta, present)
    if gone:
        names = ", ".join(f"rank{r}.db" for r in gone)
        have = rank_span(present) or "none"
        raise MlaprofError(
            f"{run_dir} is missing {names} (the run has ranks {_span(gone, present)}, "
            f"databases for {have}): restore the file(s) or re-import the trace"
        )


def check_not_emptied(run_dir: Path, meta: Mapping[str, Any], present: Collection[int]) -> None:
    """Refuse a run whose run.json says it ended but whose databases are gone (deleted, or not
    copied with it): it is a damaged run, never an "empty run abandoned before its first record"
    or one still "starting"."""
    status = meta.get("status")
    if not present and status in liveness.AFTER_RECORDS:
        raise MlaprofError(
            f"{run_dir} says it {status} but holds no rank database (rank<N>.db): restore the "
            "file(s) or record the run again"
        )


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

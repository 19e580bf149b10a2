"""Where each rank's files go when a run of several ranks is exported, as rocprofv3 lays out a
multi-process run: one set of files per process, under ``<host>/<pid>_`` (its default output
path ``%hostname%/%pid%``, rocprofiler-sdk "rocprofv3 command-line options", ``-d``/``-o``) where
the run knows every rank's host and pid, else ``rank<N>/[<pid>_]``. Either way the ranks import
back as ranks (mlaprof.importers.rocprof: by host folder and process, or by the ``rank<N>``
folder), never merged into one. Shared by the CSV and rocpd exporters."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlaprof.store.reader import Run

# a host name that is a plain folder name (no separator, not "." or "..")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def rank_places(run: Run) -> dict[int, tuple[str | None, int | None]]:
    """Each rank's (host, pid) where the run recorded them (an import's ``rank_sources``)."""
    where: dict[Any, tuple[Any, Any]] = {
        r.get("rank"): (r.get("host"), r.get("pid"))
        for r in run.meta.get("rank_sources") or []
        if isinstance(r, dict)
    }
    out: dict[int, tuple[str | None, int | None]] = {}
    for rank in run.ranks:
        host, pid = where.get(rank, (None, None))
        out[rank] = (
            host if isinstance(host, str) else None,
            pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        )
    return out


def process_prefixes(run: Run) -> dict[int, str]:
    """Each rank's file name prefix: ``""`` for a run of one rank, ``<host>/<pid>_`` where every
    rank's host (a plain folder name) and pid are known and no two ranks share both, else
    ``rank<N>/`` (with ``<pid>_`` where its pid is known)."""
    places = rank_places(run)
    if len(places) <= 1:
        return dict.fromkeys(places, "")
    pairs = list(places.values())
    by_host = len(set(pairs)) == len(pairs) and all(
        h is not None and _HOST.fullmatch(h) is not None and pid is not None for h, pid in pairs
    )
    return {
        rank: f"{host}/{pid}_"
        if by_host
        else f"rank{rank}/" + (f"{pid}_" if pid is not None else "")
        for rank, (host, pid) in places.items()
    }

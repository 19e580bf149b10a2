"""A run's ``report --json`` document kept beside its store, so that reading it again costs a
file read, not the analysis (pandas, NumPy, the typed sections: ~0.6 s CPU on a small run).

The document is derived data, like the fleet's replay sums (:mod:`mlaprof.store.aggregates`):
it lives in the run folder (``CACHE_NAME``), under a key that names everything it was computed
from, and is used only where that key still holds:

- the store's content: every file of the run folder (path, size, modification time in ns), so
  any write to the run (a record appended, a re-import, an edited run.json) misses; SQLite's
  shared-memory index (``-shm``) is left out, since a reader rewrites it without changing a row;
- the run's status and reason as a reader sees them now (a writer's lock that dies changes the
  status without a write);
- the folder's resolved path (a copy of the run, whose name is part of the document, misses);
- the code that computed it: every file of the mlaprof package and the analysis' libraries
  (pandas, NumPy, pyarrow, DuckDB), Python's version, and the shadow-analysis choices.

A run whose writer is at work (a live run, an import in progress) is never kept nor read back.
Writing is best effort: a run folder that cannot be written (read-only media) is reported on
as before, only without the saving.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Protocol

from mlaprof.store import liveness


class Run(Protocol):
    """What the cache reads of a run (:class:`mlaprof.store.reader.Run`; the reader's listing
    reads the cache, so the cache names no reader)."""

    path: Path

    @property
    def status(self) -> str: ...

    @property
    def reason(self) -> str | None: ...


CACHE_NAME = ".report-cache.json"
# the libraries whose code shapes the document (the analysis' frames and queries)
LIBRARIES = ("pandas", "numpy", "pyarrow", "duckdb")
_PACKAGE = Path(__file__).resolve().parents[1]


def _tree_stats(root: Path, skip: str = "", suffix: str = "") -> list[list[object]]:
    """(relative path, size, mtime in ns) of every file under ``root`` (names starting with
    ``skip`` left out), sorted."""
    out: list[list[object]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if (skip and f.startswith(skip)) or f.endswith("-shm") or not f.endswith(suffix):
                continue
            p = os.path.join(folder, f)
            try:
                st = os.stat(p)
            except OSError:  # removed while walking: the key cannot hold, nothing is kept
                return [["unreadable", p]]
            out.append([os.path.relpath(p, root), st.st_size, st.st_mtime_ns])
    out.sort()
    return out


def code_identity(package: Path = _PACKAGE) -> list[object]:
    """What the analysis' code is: the package's own files and the libraries' entry files
    (an upgrade rewrites them), located without importing them."""
    libs: list[object] = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        st = os.stat(origin) if origin and os.path.exists(origin) else None
        libs.append([name, origin, None if st is None else [st.st_size, st.st_mtime_ns]])
    return [sys.version, _tree_stats(package, suffix=".py"), libs]


def key(
    run: Run, shadow: dict[str, str] | None = None, code: list[object] | None = None
) -> str | None:
    """The key the run's document is kept under now; None where it must not be kept (a writer
    at work). Take it BEFORE the analysis reads the run: a write during the analysis then
    leaves a key the next reader does not match. ``code``: :func:`code_identity`, where a
    caller reading many runs at one moment took it once (a listing)."""
    status = run.status
    if status in liveness.LIVE:
        return None
    ident = [
        str(run.path.resolve()),
        status,
        run.reason,
        sorted((shadow or {}).items()),
        _tree_stats(run.path, skip=CACHE_NAME),
        code_identity() if code is None else code,
    ]
    return hashlib.sha256(json.dumps(ident, default=str).encode()).hexdigest()


def read(run: Run, k: str | None) -> str | None:
    """The ``report --json`` text kept for ``run`` under key ``k``, or None."""
    if k is None:
        return None
    try:
        with open(run.path / CACHE_NAME, encoding="utf-8") as f:
            if f.readline().rstrip("\n") != k:
                return None
            return f.read()
    except (OSError, UnicodeDecodeError):  # none kept yet, or unreadable: build it
        return None


def write(run: Run, k: str | None, text: str) -> bool:
    """Keep ``text`` (the run's ``report --json`` document) under key ``k`` (taken before the
    analysis); False where it is not kept (no key, or a folder that cannot be written)."""
    if k is None:
        return False
    tmp = run.path / f"{CACHE_NAME}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(k + "\n" + text)
        os.replace(tmp, run.path / CACHE_NAME)  # a reader sees the old file or the new one
    except OSError:  # read-only or full: the report stands, only the saving is lost
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True

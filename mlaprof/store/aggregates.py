"""Small per-rank tables an import derives from its kernels for an analysis that would otherwise
scan every kernel of a fleet at each report (the replay time's per-step sums: a few rows per step
and layer, where the kernels are millions). Each is a Parquet file in the run folder
(``aggregates/<name>/rank=<N>.parquet``), named in the rank database's ``meta`` table with its row
count and the key its reader checks it against (what the aggregate was computed from); a run
without one (imported before, or written live) is simply read the long way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError

PREFIX = "aggregate:"


def _rel(name: str, rank: int) -> str:
    return f"aggregates/{name}/rank={int(rank)}.parquet"


def write(bulk: Any, name: str, table: Any, key: dict[str, Any]) -> None:
    """``table`` (Arrow) as rank ``bulk.rank``'s aggregate ``name``, recorded with ``key`` in
    the rank database (inside the import's transaction)."""
    import pyarrow.parquet as pq

    rel = _rel(name, bulk.rank)
    path = Path(bulk.run_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), compression="lz4")
    doc = {"file": rel, "rows": table.num_rows, "key": key}
    bulk.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (PREFIX + name, json.dumps(doc))
    )


def read(run: Any, rank: int, name: str) -> tuple[Any, dict[str, Any]] | None:
    """Rank ``rank``'s aggregate ``name`` (Arrow table, key), or None where the run has none.
    A recorded file that is missing or does not hold its rows is an error, as for the kernels'
    own files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    raw = run.rank_meta(rank).get(PREFIX + name)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        rel, rows, key = str(doc["file"]), int(doc["rows"]), dict(doc["key"])
    except (TypeError, ValueError, KeyError):
        raise MlaprofError(f"{run.path}: corrupt aggregate entry {name!r} of rank {rank}") from None
    path = Path(run.path) / rel
    if rel != _rel(name, rank) or not path.is_file():
        raise MlaprofError(f"{run.path} is incomplete: {rel} ({name} of rank {rank}) is missing")
    try:
        tab = pq.read_table(str(path))
    except (pa.ArrowException, OSError) as e:
        raise MlaprofError(f"{path} is not a readable aggregate file ({e})") from None
    if tab.num_rows != rows:
        raise MlaprofError(f"{path} does not hold the recorded {rows} rows ({tab.num_rows})")
    return tab, key

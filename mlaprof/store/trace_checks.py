"""An import's trace checks: the store's ``trace_checks`` table, one rank's checks per rank.

An import checks what it took apart, rank by rank: how many replays miss kernels, how many
graph launches it saw, which layers ran without stage 2, how steps were told apart, how many
dispatch records repeated. Each check is a group of items (``launches``: ``graph_launches``,
``runtime_api_calls``, ...); a row holds one item of one rank: its ``count`` where it is a
count, else its value as JSON in ``detail`` (a text, a list, a per-path record). A group with no
item is one row whose ``item`` is NULL and whose ``detail`` is the group's JSON (``{}``).

The rows are the rank's own, never a sum over ranks: a view or an analysis that adds ranks up
says so (:func:`mlaprof.analysis.run_checks.fleet`). Runs written before schema version 3 kept
the checks in ``run.json`` (``trace_checks``, ``trace_checks_by_rank``, ``trace_records_by_rank``):
:func:`from_run_json` gives their rows, so the reader serves the table for them too (migrated on
read, the run folder untouched). An older multi-rank import that kept only the sum over its ranks
has its checks under :data:`SUMMED_RANKS` (-1), never under a rank they may not belong to.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mlaprof.store.schema import columns

TABLE = "trace_checks"
SUMMED_RANKS = -1  # rows of an older import that kept only its ranks' sum (run.json)
RECORDS = "records"  # the group of the dispatch records taken apart (repeated, nameless)

# run.json keys of runs written before the table (schema version < 3)
LEGACY_CHECKS = "trace_checks"
LEGACY_CHECKS_BY_RANK = "trace_checks_by_rank"
LEGACY_RECORDS_BY_RANK = "trace_records_by_rank"
LEGACY_KEYS = (LEGACY_CHECKS, LEGACY_CHECKS_BY_RANK, LEGACY_RECORDS_BY_RANK)


@dataclass(frozen=True)
class TraceChecks:
    """One rank's trace checks (``rank`` :data:`SUMMED_RANKS`: an older import's sum over its
    ranks). ``groups``: check -> item -> count (int) or value (what the import recorded)."""

    rank: int
    groups: Mapping[str, Any] = field(default_factory=dict)

    def group(self, name: str) -> dict[str, Any]:
        """One check's items (empty where the import did not run it)."""
        g = self.groups.get(name)
        return dict(g) if isinstance(g, Mapping) else {}

    def __bool__(self) -> bool:
        return bool(self.groups)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def rows(checks: Mapping[str, Any]) -> list[tuple[str, str | None, int | None, str | None]]:
    """``(check_name, item, count, detail)`` of one rank's checks (a check -> items mapping)."""
    out: list[tuple[str, str | None, int | None, str | None]] = []
    for name, items in checks.items():
        if not isinstance(items, Mapping) or not items:
            out.append((str(name), None, None, json.dumps(items)))
            continue
        for item, v in items.items():
            if _is_count(v):
                out.append((str(name), str(item), int(v), None))
            else:
                out.append((str(name), str(item), None, json.dumps(v)))
    return out


def groups_of(
    table_rows: Iterable[tuple[int, str, str | None, int | None, str | None]],
) -> dict[int, TraceChecks]:
    """``(rank, check_name, item, count, detail)`` rows back into each rank's record."""
    out: dict[int, dict[str, Any]] = {}
    for rank, name, item, count, detail in table_rows:
        g = out.setdefault(int(rank), {})
        if item is None:
            g[name] = json.loads(detail) if detail is not None else {}
            continue
        items = g.setdefault(name, {})
        items[item] = int(count) if count is not None else json.loads(detail or "null")
    return {r: TraceChecks(r, g) for r, g in sorted(out.items())}


def write(con: sqlite3.Connection, rank: int, checks: Mapping[str, Any]) -> None:
    """Store one rank's checks: the groups named in ``checks`` replace that rank's rows of
    them (a check run again on the rank's next file holds its whole count)."""
    names = [str(n) for n in checks]
    if not names:
        return
    con.execute(
        f"DELETE FROM {TABLE} WHERE rank = ? AND check_name IN ({', '.join('?' * len(names))})",
        (int(rank), *names),
    )
    cols = columns(TABLE)
    con.executemany(
        f"INSERT INTO {TABLE} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [(int(rank), *r) for r in rows(checks)],
    )


def read_rank(con: sqlite3.Connection, rank: int) -> TraceChecks:
    """One rank's checks as its database holds them (an import adding to them)."""
    got = con.execute(
        f"SELECT rank, check_name, item, count, detail FROM {TABLE} WHERE rank = ? ORDER BY rowid",
        (int(rank),),
    ).fetchall()
    return groups_of(got).get(int(rank), TraceChecks(int(rank)))


def from_run_json(meta: Mapping[str, Any], ranks: Iterable[int]) -> dict[int, TraceChecks]:
    """The checks a run written before the table kept in ``run.json``, per rank: each rank's own
    (``trace_checks_by_rank``) with its dispatch records (``trace_records_by_rank``); where only
    the sum over ranks is there (``trace_checks``), the run's one rank's, or, for several ranks,
    under :data:`SUMMED_RANKS`."""
    ranks = sorted(int(r) for r in ranks)
    out: dict[int, dict[str, Any]] = {}
    by_rank = meta.get(LEGACY_CHECKS_BY_RANK)
    if isinstance(by_rank, Mapping) and by_rank:
        for r, checks in by_rank.items():
            if str(r).lstrip("-").isdigit() and isinstance(checks, Mapping):
                out[int(r)] = dict(checks)
    elif isinstance(meta.get(LEGACY_CHECKS), Mapping) and meta[LEGACY_CHECKS]:
        owner = ranks[0] if len(ranks) == 1 else SUMMED_RANKS
        out[owner] = dict(meta[LEGACY_CHECKS])
    records = meta.get(LEGACY_RECORDS_BY_RANK)
    if isinstance(records, Mapping):
        for r, rec in records.items():
            if str(r).lstrip("-").isdigit() and isinstance(rec, Mapping):
                out.setdefault(int(r), {})[RECORDS] = dict(rec)
    return {r: TraceChecks(r, g) for r, g in sorted(out.items())}


def table_rows(checks: Mapping[int, TraceChecks]) -> list[tuple[Any, ...]]:
    """The table's rows (``columns(TABLE)`` order) of these records: a migrated run's rows."""
    return [(rank, *row) for rank, tc in sorted(checks.items()) for row in rows(tc.groups)]

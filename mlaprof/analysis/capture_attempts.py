"""A failed FULL capture attempt's memory row, read as the attempt: no graph was kept and no
bytes were measured, only its time (mlaprof.recording.ATTEMPT). Runs recorded before the attempt
had its own mode hold a placeholder in its place; every analyzer and the dashboard read both
alike through :func:`as_attempt`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from mlaprof.recording import ATTEMPT

BYTES = ("pool_bytes", "allocator_bytes", "driver_bytes")


def failed_sizes(captures: Iterable[Mapping[str, Any]]) -> set[tuple[Any, Any]]:
    """``(rank, capture size)`` of every FULL capture that failed."""
    return {
        (c.get("rank"), c.get("capture_size"))
        for c in captures
        if c.get("graph_mode") == "FULL" and c.get("status") == "failed"
    }


def as_attempt(row: Mapping[str, Any], failed: set[tuple[Any, Any]]) -> dict[str, Any]:
    """A memory row as what it records: the failed FULL attempt of its size where it is one.
    Runs recorded before the attempt had its own mode hold it as a PIECEWISE row of three zero
    byte counts at that size (mlaprof/gpu/capture_runner.py, ``_record_failed_capture``, which
    then ran the steps eagerly: no PIECEWISE graph was captured), zeros that were never
    measured; read as the attempt, its bytes unknown."""
    out = dict(row)
    placeholder = out.get("graph_mode") == "PIECEWISE" and all(out.get(b) == 0 for b in BYTES)
    if placeholder and (out.get("rank"), out.get("capture_size")) in failed:
        out.update(dict.fromkeys(BYTES), graph_mode="FULL" + ATTEMPT)
    return out


def with_attempts(memory: pd.DataFrame, captures: pd.DataFrame) -> pd.DataFrame:
    """:func:`as_attempt` over a memory table (what every analyzer reads, once at load)."""
    if memory.empty or captures.empty:
        return memory
    failed = failed_sizes(captures.to_dict("records"))
    if not failed:
        return memory
    rows = [as_attempt(r, failed) for r in memory.to_dict("records")]
    return pd.DataFrame(rows, columns=memory.columns).astype(
        {c: "float64" for c in BYTES if c in memory}
    )

"""Do the scheduler's records and the worker's agree: the EngineCore's acceptance counters per
scheduler step against the worker's verify steps of one rank, in order (same verify rows, same
draft tokens). Only records both sides committed are compared."""

from __future__ import annotations

from typing import Any


def scheduler_matches_worker(
    worker: list[dict[str, Any]], scheduler: list[dict[str, Any]]
) -> bool | None:
    """True where every scheduler step matches the worker's verify step at its place and both
    hold the same number of steps; None where the scheduler recorded none (not both present)."""
    if not scheduler:
        return None
    pairs = list(zip(worker, scheduler, strict=False))
    return len(worker) == len(scheduler) and all(
        s["verify_rows"] == a["verify_rows"] and s["verify_draft_tokens"] == a["draft_tokens"]
        for s, a in pairs
    )

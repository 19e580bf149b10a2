"""The one way a count over ranks is said: per rank, as a range over ranks, never a silent sum.
Shared by the run listing (``runs``, the picker) and the analyzers' texts."""

from __future__ import annotations

from collections.abc import Mapping


def per_rank_count(counts: Mapping[int, int], unit: str = "") -> str:
    """``"3 step(s)"`` for one rank; ``"3 step(s) per rank (2 ranks)"`` where every rank has
    the same count; ``"3-4 step(s) per rank (ranks 0: 3, 1: 4)"`` where they differ (``unit``
    empty: ``"3 per rank (2 ranks)"``)."""
    u = f" {unit}" if unit else ""
    if not counts:
        return f"0{u}"
    values = sorted(set(counts.values()))
    if len(counts) == 1:
        return f"{values[0]}{u}"
    if len(values) == 1:
        return f"{values[0]}{u} per rank ({len(counts)} ranks)"
    each = ", ".join(f"{r}: {n}" for r, n in sorted(counts.items())[:16])
    more = ", ..." if len(counts) > 16 else ""
    return f"{values[0]}-{values[-1]}{u} per rank (ranks {each}{more})"

"""The one way ranks and a count over ranks are said: which ranks (a span where they run on),
per rank, as a range over ranks, never a silent sum. Shared by the run listing (``runs``, the
picker), the analyzers' texts and every view.

Which ranks: :func:`rank_list` ("ranks 0-3"); how many and which: :func:`ranks_count`
("4 (ranks 0-3)", a table cell or a field); some of the run's: :func:`ranks_of` ("ranks 0-3 of
8"); a count per rank: :func:`per_rank_count`. A bare :func:`rank_span` ("0-3") only where the
words around it say ranks; never a list's repr ("[0, 1]"). A count's noun agrees with it: a
unit's "(s)" is resolved by :func:`plural` ("1 step", "3 steps"), never printed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# a noun's plural ending, resolved by the count it follows: "step(s)", "launch(es)"
_MARK = re.compile(r"\((e?s)\)")


def plural(unit: str, n: float | str | None) -> str:
    """``unit`` with its "(s)" or "(es)" resolved by the count ``n`` (or the text a count or a
    range of counts is said in, "1", "2-4"): ``plural("eager step(s)", 1)`` is ``"eager
    step"``, any other count (0, several, a range, unknown) ``"eager steps"`` (``"launch(es)"``:
    ``"launches"``); a unit without either as it is."""
    one = n == 1 or (isinstance(n, str) and n.strip() == "1")
    return _MARK.sub("" if one else r"\1", unit)


def counted(n: int, unit: str) -> str:
    """``"1 step"``, ``"3 steps"``: a count and its noun (``unit``'s "(s)" resolved by it)."""
    return f"{n} {plural(unit, n)}"


def per_rank_count(counts: Mapping[int, int], unit: str = "") -> str:
    """``"3 steps"`` for one rank; ``"3 steps per rank (2 ranks)"`` where every rank has the
    same count; ``"3-4 steps per rank (ranks 0: 3, 1: 4)"`` where they differ (``unit``, e.g.
    ``"step(s)"``, agrees with the count: ``"1 step"``; empty: ``"3 per rank (2 ranks)"``)."""
    if not counts:
        return counted(0, unit) if unit else "0"
    values = sorted(set(counts.values()))
    u = f" {plural(unit, values[-1] if len(values) == 1 else 2)}" if unit else ""
    if len(counts) == 1:
        return f"{values[0]}{u}"
    if len(values) == 1:
        return f"{values[0]}{u} per rank ({len(counts)} ranks)"
    each = ", ".join(f"{r}: {n}" for r, n in sorted(counts.items())[:16])
    more = ", ..." if len(counts) > 16 else ""
    return f"{values[0]}-{values[-1]}{u} per rank (ranks {each}{more})"


# ranks named one by one at most, in a span text (a fleet's list stays one line)
SPAN_ITEMS = 16


def rank_span(ranks: Iterable[int]) -> str:
    """``"0-3"`` for consecutive ranks, ``"0, 2, 5"`` otherwise, ``"0-2, 5"`` for both,
    ``"0"`` for one; past :data:`SPAN_ITEMS` items, ``", ... (N ranks)"``."""
    rs = sorted(set(ranks))
    items: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        items.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    if len(items) > SPAN_ITEMS:
        return ", ".join(items[:SPAN_ITEMS]) + f", ... ({len(rs)} ranks)"
    return ", ".join(items)


def rank_list(ranks: Iterable[int]) -> str:
    """``rank 3`` / ``ranks 0-7`` / ``ranks 0, 2, 5``: the ranks a statement holds for."""
    rs = sorted(set(ranks))
    return ("rank " if len(rs) == 1 else "ranks ") + rank_span(rs)


def ranks_of(ranks: Iterable[int], total: int) -> str:
    """``rank 1 of 3`` / ``ranks 0-3 of 8``: the ranks a statement holds for, or a view draws,
    out of the run's ``total`` (a finding on some ranks, the rank a figure or the dashboard's
    step-time line draws)."""
    return f"{rank_list(ranks)} of {int(total)}"


def ranks_count(ranks: Iterable[int]) -> str:
    """``1 (rank 0)``, ``8 (ranks 0-7)`` or ``3 (ranks 0, 2, 5)``: how many ranks and which (a
    list of rank ids never reads as a count)."""
    rs = sorted({int(x) for x in ranks})
    return f"{len(rs)} ({rank_list(rs)})"

"""Where a run stands, as every view says it: its status in the one vocabulary, why it ended
early where its writer recorded that, and how far each rank's committed records reach (a run
still written or one whose writer died shows partial numbers: the views say so, from here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.sections import RankCommitted, RunState, closed_record
from mlaprof.rank_counts import per_rank_count, rank_list
from mlaprof.store.liveness import RunStatus

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd

# why the numbers may be partial, per status (finished: they are not)
_WHY = {
    RunStatus.RUNNING: "still being written: the figures below are the records committed so far",
    RunStatus.INCOMPLETE: "its writer stopped without finishing (killed or crashed)",
}


def _committed(steps: pd.DataFrame, ranks: Iterable[int]) -> list[RankCommitted]:
    """Each rank's committed steps and last step; a rank of the run with none committed: 0."""
    counts = {int(r): (0, None) for r in ranks}
    if len(steps) and "rank" in steps:
        by_rank = steps.groupby("rank")["step"]
        for (r, n), (_, hi) in zip(by_rank.size().items(), by_rank.max().items(), strict=True):
            counts[int(r)] = (int(n), int(hi))
    elif len(steps):  # a store without ranks: one rank's
        counts = {0: (len(steps), int(steps["step"].max()))}
    return [RankCommitted(rank=r, steps_committed=n, last_step=last)
            for r, (n, last) in sorted(counts.items())]  # fmt: skip


def _same(values: list[int | None]) -> int | None:
    return values[0] if values and len(set(values)) == 1 else None


def _words(per_rank: list[RankCommitted]) -> tuple[str, str] | None:
    """Each rank's committed steps and last step in words (``"10 steps"``, ``"9"`` for one
    rank or ranks that agree, else the range with each rank's), never one rank's as the run's;
    None where no rank committed a step."""
    if not any(r.steps_committed for r in per_rank):
        return None
    counts = {r.rank: r.steps_committed for r in per_rank}
    lasts = {r.rank: r.last_step for r in per_rank if r.last_step is not None}
    one = _same(list(lasts.values()))
    empty = [r.rank for r in per_rank if r.last_step is None]
    gap = f" ({rank_list(empty)}: no step committed)" if empty else ""
    return per_rank_count(
        counts, "step(s)"
    ), f"{one if one is not None else per_rank_count(lasts)}{gap}"


def run_state(
    status: str, reason: str | None, steps: pd.DataFrame, ranks: Iterable[int] = ()
) -> RunState:
    """Status, reason, each rank's committed steps (``per_rank``, ``committed``: the words
    every view shows) and text. ``steps_committed`` / ``last_step``: the one value every rank
    shares, None where the ranks differ (never the fewest rank's shown as the run's). ``ranks``:
    the run's ranks, so that a rank with no step committed counts 0. ``text`` is the line
    every view prints for where the run stands, never empty: a run that finished and closed its
    record "finished; <committed>", one that finished without closing it (a drained engine
    stopped by a signal) "finished (drained: ...); ...", one that did not finish why; the views
    flag it above a report only where the run did not close its record (``RunState.closed``)."""
    per_rank = _committed(steps, ranks)
    words = _words(per_rank)
    # the committed words the state line is made of (said once: the line holds them whole)
    reach = (
        "no step committed"
        if words is None
        else f"{words[0]} committed, last committed step {words[1]}"
    )
    n = _same([r.steps_committed for r in per_rank]) if per_rank else 0
    last = _same([r.last_step for r in per_rank])
    if closed_record(status, reason):  # nothing to flag, but a state all the same (never "")
        text = f"finished; {reach}"
    elif status == RunStatus.FINISHED:  # e.g. an engine stopped after a clean drain
        text = f"finished ({reason}); {reach}"
    else:
        why = _WHY.get(status, "it did not finish")
        text = f"{why}; {reach}" + (f"; reason: {reason}" if reason else "")
    return RunState(
        status=RunStatus(status),
        # Run.reason as it is: None where no writer recorded one, finished or not (one "no
        # reason" in every view and in the JSON document: null, read "none recorded")
        reason=reason or None,
        steps_committed=n,
        last_step=last,
        committed=reach,
        per_rank=per_rank,
        text=text,
    )

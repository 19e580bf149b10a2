"""Where a run stands, as every view says it: its status in the one vocabulary, why it ended
early where its writer recorded that, and how far its committed records reach (a run still
written or one whose writer died shows partial numbers: the views say so, from here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlaprof.analysis.sections import RunState
from mlaprof.rank_counts import per_rank_count
from mlaprof.store.liveness import RunStatus

if TYPE_CHECKING:
    import pandas as pd

# why the numbers may be partial, per status (finished: they are not)
_WHY = {
    RunStatus.RUNNING: "still being written: the figures below are the records committed so far",
    RunStatus.INCOMPLETE: "its writer stopped without finishing (killed or crashed)",
}


def run_state(status: str, reason: str | None, steps: pd.DataFrame) -> RunState:
    """Status, reason, steps_committed, last_step and text (``steps_committed`` /
    ``last_step``: per rank, the fewest / lowest of any rank; ``text`` says each rank's): ``text`` is the line a view
    prints for a run that did not finish, or that finished without closing its record (a
    drained engine stopped by a signal: "finished (drained: ...)"); empty for a finished one."""
    # per rank, never summed: the steps every rank committed (the fewest of any rank) and the
    # last step every rank reached
    if len(steps) and "rank" in steps:
        by_rank = steps.groupby("rank")["step"]
        counts = {int(r): int(n) for r, n in by_rank.size().items()}
        n, last = min(counts.values()), int(by_rank.max().min())
    else:
        counts = {0: int(len(steps))}
        n, last = int(len(steps)), int(steps["step"].max()) if len(steps) else None
    reach_n = per_rank_count(counts, "step(s)")
    text = ""
    if status == RunStatus.FINISHED and reason:  # e.g. an engine stopped after a clean drain
        text = f"finished ({reason}); {reach_n} committed, last committed step {last}"
    elif status != RunStatus.FINISHED:
        why = _WHY.get(status, "it did not finish")
        reach = (
            f"{reach_n} committed, last committed step {last}"
            if last is not None
            else "no step committed"
        )
        text = f"{why}; {reach}" + (f"; reason: {reason}" if reason else "")
    return RunState(
        status=RunStatus(status),
        # Run.reason as it is: None where no writer recorded one, finished or not (one "no
        # reason" in every view and in the JSON document: null, read "none recorded")
        reason=reason or None,
        steps_committed=n,
        last_step=last,
        text=text,
    )

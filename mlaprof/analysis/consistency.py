"""Cross-process consistency of a recorded vLLM engine: do the scheduler's records (the
EngineCore's acceptance counters, ``rank<N>.scheduler.db``) and the worker's verify steps
(``rank<N>.db``) describe the same steps?

The two processes commit to two databases at different moments, so a run read while it is
written (and even a finished run read in the instant between the two last commits) holds more
steps on one side. Only the steps both sides have committed are compared: up to the smaller
committed count. A side that is ahead is reported as pending, never as a disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted, plural, rank_list

if TYPE_CHECKING:
    from mlaprof.analysis.step_records import Acceptance, EngineStep


@dataclass(frozen=True)
class Agreement:
    """The verdict over the steps both sides hold.

    ``agree``: True / False over ``compared`` steps; ``None`` when either side has no step yet
    (nothing to compare: not an agreement). ``worker_ahead`` / ``scheduler_ahead``: steps one
    side committed that the other has not (yet). ``first_mismatch``: the index of the first
    compared step whose rows or draft tokens differ."""

    agree: bool | None
    compared: int
    worker_ahead: int
    scheduler_ahead: int
    first_mismatch: int | None = None

    @property
    def text(self) -> str:
        """How every view words the verdict."""
        if self.agree is None:
            return "not both present"
        word = "agree" if self.agree else "DISAGREE"
        out = f"{word} on {counted(self.compared, 'step(s)')} both committed"
        if self.first_mismatch is not None:
            out += f" (first at verify step {self.first_mismatch})"
        ahead = [
            f"{n} {side} {plural('step(s)', n)} not yet matched"
            for side, n in (("worker", self.worker_ahead), ("scheduler", self.scheduler_ahead))
            if n
        ]
        return out + (f"; {', '.join(ahead)}" if ahead else "")


def scheduler_agreement(worker_verify: list[EngineStep], scheduler: list[Acceptance]) -> Agreement:
    """Compare the worker's verify steps (in order) with the scheduler's acceptance records (in
    order) over the steps both committed: same verify rows, same draft tokens per step. Both
    sides are one engine's: one worker rank's steps, one EngineCore's records (a data-parallel
    run's are paired engine by engine, :func:`mlaprof.analysis.served.served_summary`)."""
    for side, ranks in (("worker", {w.rank for w in worker_verify}),
                        ("scheduler", {s.rank for s in scheduler})):  # fmt: skip
        if len(ranks) > 1:  # two engines' steps in one order would pair at random
            raise MlaprofError(
                f"internal: {side} records of {rank_list(ranks)} compared as one engine's"
            )
    n = min(len(worker_verify), len(scheduler))
    if not worker_verify or not scheduler:
        return Agreement(None, 0, len(worker_verify), len(scheduler))
    first = next(
        (
            i
            for i, (w, s) in enumerate(zip(worker_verify[:n], scheduler[:n], strict=True))
            if w.verify_rows != s.verify_rows or w.verify_draft_tokens != s.draft_tokens
        ),
        None,
    )
    return Agreement(
        agree=first is None,
        compared=n,
        worker_ahead=len(worker_verify) - n,
        scheduler_ahead=len(scheduler) - n,
        first_mismatch=first,
    )

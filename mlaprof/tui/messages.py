"""Messages the follower thread and the widgets post to the dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from mlaprof.analysis.live import LiveSummary


class SummaryUpdated(Message):
    """The update worker's newest summary of the run (provisional or full): it replaces the
    one before, never merged with it (``None``: no summary could be made yet)."""

    def __init__(self, live: LiveSummary | None) -> None:
        super().__init__()
        self.live = live

    def can_replace(self, message: Message) -> bool:
        """A newer summary supersedes one still queued: the dashboard draws only the newest, so
        a slow redraw never works through a backlog of stale summaries."""
        return isinstance(message, SummaryUpdated)


class RunProblem(Message):
    """The followed run cannot be read any more: deleted, truncated, corrupted."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def can_replace(self, message: Message) -> bool:
        """A newer problem supersedes one still queued (the run is unreadable either way)."""
        return isinstance(message, RunProblem)


class DrillDown(Message):
    """Open the drill-down of one layer."""

    def __init__(self, layer: int) -> None:
        super().__init__()
        self.layer = layer

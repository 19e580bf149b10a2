"""Messages the follower thread and the widgets post to the dashboard."""

from __future__ import annotations

from textual.message import Message


class RunUpdated(Message):
    """The follower read ``new_rows`` new records (or a problem changed)."""

    def __init__(self, new_rows: int) -> None:
        super().__init__()
        self.new_rows = new_rows


class RunProblem(Message):
    """The followed run cannot be read any more: deleted, truncated, corrupted."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class DrillDown(Message):
    """Open the drill-down of one layer."""

    def __init__(self, layer: int) -> None:
        super().__init__()
        self.layer = layer

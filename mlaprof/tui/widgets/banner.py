"""One-line message for a run that cannot be read (deleted, truncated, corrupt) or is waiting."""

from __future__ import annotations

from textual.widgets import Static


class ProblemBanner(Static):
    def show(self, text: str | None) -> None:
        if text == getattr(self, "_text", None):
            return
        self._text = text
        self.display = bool(text)
        if text:
            self.update(f"! {text}")

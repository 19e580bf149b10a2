"""Help: every key of the screen it was opened from (each screen lists its keys in ``HELP``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

# keys every screen has (the app's bindings)
APP_KEYS: tuple[tuple[str, str], ...] = (
    ("?", "this help (the keys of the current screen)"),
    ("q", "quit"),
)


def help_text(title: str, keys: tuple[tuple[str, str], ...]) -> str:
    """Plain text of the help box: one key per line, then what it does."""
    rows = (*keys, *APP_KEYS)
    width = max(len(k) for k, _ in rows)
    body = "\n".join(f"{k:<{width}}  {text}" for k, text in rows)
    return f"{title}: keys\n\n{body}\n\nescape or ? closes this help"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]

    def __init__(self, title: str, keys: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self.text = help_text(title, keys)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(self.text, id="help-text", markup=False)

"""Help: every key of the screen it was opened from (each screen lists its keys in ``HELP``).

The keys sit in a two-column table, so a description that wraps at 80 columns stays under its own
column; how to close the help is on the title line, which never scrolls away."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

# keys every screen has (the app's bindings)
APP_KEYS: tuple[tuple[str, str], ...] = (
    ("?", "this help (the keys of the current screen)"),
    ("q", "quit"),
)
CLOSE = "escape or ? closes"


def help_rows(keys: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    return (*keys, *APP_KEYS)


def help_title(title: str) -> str:
    return f"{title}: keys  ({CLOSE})"


def help_text(title: str, keys: tuple[tuple[str, str], ...]) -> str:
    """Plain text of the help box: the title line, then one key per line and what it does."""
    rows = help_rows(keys)
    width = max(len(k) for k, _ in rows)
    body = "\n".join(f"{k:<{width}}  {text}" for k, text in rows)
    return f"{help_title(title)}\n\n{body}"


def help_table(keys: tuple[tuple[str, str], ...]) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0), expand=True)
    table.add_column("key", no_wrap=True, style="bold")
    table.add_column("what", ratio=1)
    for k, text in help_rows(keys):
        table.add_row(k, text)
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]

    def __init__(self, title: str, keys: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self.title_line = help_title(title)
        self.keys = keys
        self.text = help_text(title, keys)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(self.title_line, id="help-title", markup=False)
            with VerticalScroll(id="help-scroll"):
                yield Static(help_table(self.keys), id="help-text")

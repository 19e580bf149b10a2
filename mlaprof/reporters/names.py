"""Names kept whole in narrow tables: a policy or kernel name that does not fit its column is
broken after one of its separators, never inside a token (``aiter-gluon-`` / ``v0.1.19.post2``,
not ``aiter-gluon-v0.1.19.post`` / ``2``, which reads as another version).

rich breaks lines at spaces only and folds a longer word at the column edge; these helpers
pre-break the name into lines that fit, at the width the rest of the table leaves."""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from mlaprof.textsafe import plain

# a break goes after a word separator first; a version's dots only when a part is still too long
_WORDS = re.compile(r"[^\s/_\-:(),]*[\s/_\-:(),]*")
_DOTS = re.compile(r"[^.]*\.*")
FLOOR = 10  # never squeeze a name column below this (the table wraps instead)


def _pieces(text: str, rx: re.Pattern[str]) -> list[str]:
    return [p for p in rx.findall(text) if p]


def wrap_name(name: str, width: int) -> str:
    """``name`` on lines of at most ``width`` cells, broken only after a separator (space, ``-``,
    ``_``, ``/``, ``:``, then ``.``); a single token longer than ``width`` is the one cut."""
    if width < 1 or len(name) <= width:
        return name
    parts: list[str] = []
    for word in _pieces(name, _WORDS):
        parts += [word] if len(word) <= width else _pieces(word, _DOTS)
    lines: list[str] = []
    line = ""
    for part in parts:
        if line and len(line + part.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        while len(part.rstrip()) > width:  # one token wider than the column: cut, no choice
            if line:
                lines.append(line.rstrip())
                line = ""
            lines.append(part[:width])
            part = part[width:]
        line += part
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines)


def fit_names(
    console: Console,
    build: Callable[[Callable[[str], str]], Table],
    floor: int = FLOOR,
    column: int = 0,
) -> Table:
    """The table ``build(show)`` makes, its name cells pre-broken to the width the console
    leaves them. ``build`` renders each name cell as ``show(name)`` (control characters shown,
    markup escaped: the cell is data); it is called twice: once with one-letter names to
    measure what the other columns need, once for real. ``column``: the index of the one column
    that holds the names (its header counts as room)."""
    probe = build(lambda _name: "x")
    # the other columns at their natural width (numbers and headers whole), names one letter
    least = Measurement.get(console, console.options, probe).maximum
    # the probe's name column is as wide as its header (or the one letter): that is room too
    header = Text.from_markup(str(probe.columns[column].header or "")).cell_len
    room = max(floor, console.width - least + max(1, header))
    return build(lambda name: shown(name, room))


def shown(name: str, width: int) -> str:
    """A name as a rich cell: safe (textsafe.term) and broken to ``width`` at its separators."""
    return "\n".join(escape(line) for line in wrap_name(plain(name), width).split("\n"))

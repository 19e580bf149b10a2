"""Strings from traces and logs, made safe to show: no terminal escapes, no rich markup.

A kernel name, a backend taken from a vLLM log or a run name is data, not formatting: control
characters (ESC sequences that move the cursor or retitle the terminal, newlines that break a
table row) are shown as ``\\xNN``, and rich markup (``[red]``, ``[/]``) is escaped so that it is
printed as written. HTML has its own escaping (``html.escape``) in the HTML report.
"""

from __future__ import annotations

import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


# a trace string longer than this is shown shortened, with its length: a 50 KB version string or
# a 30 KB kernel name is data to name, not to print whole (and wrapping it costs every renderer)
LONG = 2000


def short(value: Any, limit: int = LONG) -> str:
    """``str(value)``, cut to ``limit`` characters with its full length said when longer."""
    s = str(value)
    if len(s) <= limit:
        return s
    keep = max(1, limit - 40)
    return f"{s[:keep]}... ({len(s):,} chars)"


def plain(value: Any, limit: int = LONG) -> str:
    """``str(value)`` shortened (:func:`short`), every control character shown as ``\\xNN``
    (plain-text output)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", short(value, limit))


def term(value: Any, limit: int = LONG) -> str:
    """:func:`plain`, then rich markup escaped: for strings printed through rich."""
    from rich.markup import escape

    return escape(plain(value, limit))

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


def plain(value: Any) -> str:
    """``str(value)`` with every control character shown as ``\\xNN`` (plain-text output)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def term(value: Any) -> str:
    """:func:`plain`, then rich markup escaped: for strings printed through rich."""
    from rich.markup import escape

    return escape(plain(value))

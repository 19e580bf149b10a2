"""CSV cells that a spreadsheet would run as a formula, made inert on export and restored on
import (the export still round-trips through ``mlaprof import rocprof``).

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets (OWASP "CSV injection"); a kernel name from a user's trace
can start with any of them. Such a string is written with a leading ``'`` (shown, not run), and a
string that starts with ``'`` gets one more, so the mapping is one to one and the importer takes
exactly one ``'`` back off.
"""

from __future__ import annotations

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"


def neutralize(text: str) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates."""
    if text.startswith((*FORMULA_START, QUOTE)):
        return QUOTE + text
    return text


def restore(text: str) -> str:
    """The string :func:`neutralize` was given (a cell rocprofv3 wrote is returned as is)."""
    if text.startswith(QUOTE) and text[1:].startswith((*FORMULA_START, QUOTE)):
        return text[1:]
    return text

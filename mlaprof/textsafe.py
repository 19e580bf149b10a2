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
    return short_of(s[:limit], len(s), limit)


def sql_head(column: str, limit: int = LONG) -> str:
    """SQL select items (SQLite and DuckDB alike) for a string column a query only shows: its
    first ``limit`` characters and its length (``<column>_chars``), so that a 10 MB name is never
    carried whole through the query's sort (it ran DuckDB out of memory); :func:`short_of` then
    gives what :func:`short` would."""
    return f"substr({column}, 1, {int(limit)}) AS {column}, length({column}) AS {column}_chars"


def short_of(head: Any, length: Any, limit: int = LONG) -> Any:
    """:func:`short` of a string known by its first ``limit`` characters and its length."""
    if not isinstance(head, str) or not isinstance(length, (int, float)) or length != length:
        return head
    if int(length) <= limit:
        return head
    return f"{head[: max(1, limit - 40)]}... ({int(length):,} chars)"


def plain(value: Any, limit: int = LONG) -> str:
    """``str(value)`` shortened (:func:`short`), every control character shown as ``\\xNN``
    (plain-text output)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", short(value, limit))


def term(value: Any, limit: int = LONG) -> str:
    """:func:`plain`, then rich markup escaped: for strings printed through rich."""
    from rich.markup import escape

    return escape(plain(value, limit))


# Markdown (GitHub-flavoured, as a PR or CI comment renders it). A string from a trace is text,
# never markup: the characters that open HTML (``<``, ``&``), emphasis, code spans, links and
# images (``[``: ``![x](url)`` needs it), strike-through and table cells are backslash-escaped
# (CommonMark: any ASCII punctuation may be), and the autolink triggers (``://``, ``www.``, and
# a dot between a name and a letter, which a fuzzy linkifier reads as a domain: ``mla.py``) are
# broken the same way, so no URL or file name in a kernel name becomes a link or a loaded image.
_MD_SPECIAL = re.compile(r"[\\`*_\[\]<>|~&]")
_MD_AUTOLINK = re.compile(r"(?i)(?<=:)//|(?<=\bwww)\.|(?<=[a-z0-9])\.(?=[a-z])")


def _one_line(value: Any, limit: int) -> str:
    """:func:`short`, every control character (newlines too) as a space: a Markdown line stays one."""
    return _CONTROL.sub(" ", short(value, limit).replace("\r\n", " "))


def md_text(value: Any, limit: int = LONG) -> str:
    """A string as Markdown text: one line, no HTML, link, image, emphasis or table cell break."""
    s = _MD_SPECIAL.sub(lambda m: "\\" + m.group(), _one_line(value, limit))
    return _MD_AUTOLINK.sub(lambda m: "\\" + m.group() if m.group() == "." else r"\/\/", s).strip()


def md_code(value: Any, limit: int = LONG, table: bool = False) -> str:
    """A string as a Markdown code span (a run or kernel name), whatever backticks it holds.

    Inside a code span nothing is markup, so the only way out is a backtick run as long as the
    fence: the fence is one longer than the longest run inside (CommonMark 6.1), padded with a
    space when the text starts or ends with a backtick. In a table cell ``|`` still ends the cell
    (GFM escapes it even in code), so ``table=True`` escapes it."""
    s = _one_line(value, limit).strip() or " "
    if table:
        s = s.replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def plain_lines(text: str, limit: int = LONG) -> str:
    """Plain-text output of several lines (a snapshot, an import's summary): each line through
    :func:`plain`, the line breaks kept."""
    return "\n".join(plain(line, limit) for line in text.split("\n"))

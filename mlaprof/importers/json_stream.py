"""A JSON document read a chunk at a time, its one big array handed out an element at a time.

A Chrome/Kineto trace is one object whose ``traceEvents`` array holds nearly all of the file:
``json.loads`` of a 1.08M-event trace held the text and a dict per event at once (1.86 GB, 8.5x
the file). Here the text comes in chunks (:func:`mlaprof.importers.inputs.text_chunks`), every
other top-level value is decoded whole (they are small: device properties, base time), and the
array's elements are decoded one by one with :meth:`json.JSONDecoder.raw_decode` (the C scanner
``json.loads`` uses, so each value is what ``json.loads`` gives) and dropped once the caller has
read them. Memory: the window of undecoded text (a chunk, or one value larger than a chunk) and
one element. Invalid JSON is one :class:`MlaprofError` naming the file, the message and the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError

_WS = re.compile(r"[ \t\n\r]*")  # JSON's whitespace (json.loads accepts no other)
# an error this close to the window's end may be a value cut by the chunk boundary (a partial
# number "1e", literal "tru", escape "\u12"): read on before calling it invalid
_TAIL = 16


class Reset:
    """Yielded when the streamed key comes again: ``json.loads`` keeps only the last value of a
    repeated key, so what was read of the earlier array no longer counts."""


RESET = Reset()


class _Window:
    """The text not decoded yet, refilled from the chunks; counts the lines already dropped."""

    def __init__(self, pieces: Iterable[str], where: str, decoder: json.JSONDecoder) -> None:
        self.pieces = iter(pieces)
        self.where = where
        self.decoder = decoder
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.lines = 0  # newlines in the text before ``buf``

    def _fill(self, at_least: int) -> bool:
        """Read until ``at_least`` more characters are held (or the end); False at the end."""
        if self.pos:
            self.lines += self.buf.count("\n", 0, self.pos)
            self.buf = self.buf[self.pos :]
            self.pos = 0
        got = 0
        parts = [self.buf]
        while got < at_least and not self.eof:
            piece = next(self.pieces, None)
            if piece is None:
                self.eof = True
            else:
                parts.append(piece)
                got += len(piece)
        self.buf = "".join(parts)
        return got > 0

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill(1):
                return ""

    def take(self, char: str, expected: str) -> None:
        if self.peek() != char:
            self.fail(expected)
        self.pos += 1

    def opens(self, char: str, close: str) -> bool:
        """Consume the container's opening ``char``; True (its ``close`` consumed too) when
        the container is empty."""
        self.take(char, f"'{char}'")
        if self.peek() == close:
            self.pos += 1
            return True
        return False

    def closes(self, close: str) -> bool:
        """After a member: True (consumed) at the container's ``close``, False after the ``,``
        that goes on to the next member."""
        if self.peek() == close:
            self.pos += 1
            return True
        self.take(",", f"',' or '{close}'")
        return False

    def value(self) -> Any:
        """The next JSON value, decoded whole (the window grows until it holds all of it)."""
        self.peek()
        while True:
            try:
                val, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                # an incomplete value at the window's end reads as invalid: grow (doubling, so
                # a value of n characters costs O(n) retries' work in all) and decode again;
                # an error well inside the window is the file's own (no reading to its end)
                line = self.lines + e.lineno  # before _fill moves the window
                at_end = e.pos >= len(self.buf) - _TAIL or e.msg.startswith("Unterminated")
                if at_end and not self.eof:
                    self._fill(max(len(self.buf), 1))  # moves the window: decode again
                    continue
                raise MlaprofError(
                    f"{self.where}: not valid JSON ({e.msg} at line {line})"
                ) from None
            except RecursionError:
                raise MlaprofError(f"{self.where}: JSON nested too deeply") from None
            except ValueError as e:  # e.g. a number over Python's int-digits limit
                raise MlaprofError(f"{self.where}: not valid JSON ({str(e)[:120]})") from None
            if end > len(self.buf) - _TAIL and not self.eof:
                # a number may go on in the next chunk ("0." + "5"): decode it again
                self._fill(max(len(self.buf), 1))
                continue
            self.pos = end
            return val

    def fail(self, expected: str) -> None:
        line = self.lines + self.buf.count("\n", 0, self.pos) + 1
        what = "end of data" if self.pos >= len(self.buf) else repr(self.buf[self.pos])
        raise MlaprofError(f"{self.where}: not valid JSON (expecting {expected}, got {what} "
                           f"at line {line})")  # fmt: skip


class StreamedDocument:
    """One JSON document whose array under ``key`` (or the whole document, when it is an array)
    is streamed by :meth:`elements`; after that, :attr:`top` holds every other top-level member
    (``key`` itself maps to :data:`STREAMED` when its last value was an array)."""

    STREAMED = object()

    def __init__(
        self, pieces: Iterable[str], key: str, where: str | Path, **decoder_args: Any
    ) -> None:
        self.key = key
        self._w = _Window(pieces, str(where), json.JSONDecoder(**decoder_args))
        self.top: dict[str, Any] = {}

    def elements(self) -> Iterator[Any]:
        """Each element of the streamed array, in order; :data:`RESET` before a repeated key's
        array. Raises :class:`MlaprofError` on invalid JSON (also after the array)."""
        w = self._w
        first = w.peek()
        if first == "[":
            yield from self._array()
            self.top[self.key] = self.STREAMED
        elif first == "{":
            yield from self._object()
        else:
            w.value()  # a scalar document: valid JSON, but no members (no key)
        if w.peek() != "":
            w.fail("end of data")

    def _object(self) -> Iterator[Any]:
        w = self._w
        if w.opens("{", "}"):
            return
        streamed = False
        while True:
            if w.peek() != '"':
                w.fail("a property name in double quotes")
            name = w.value()
            w.take(":", "':'")
            if name == self.key and w.peek() == "[":
                if streamed:
                    yield RESET
                yield from self._array()
                streamed = True
                self.top[name] = self.STREAMED
            else:
                self.top[name] = w.value()
            if w.closes("}"):
                return

    def _array(self) -> Iterator[Any]:
        w = self._w
        if w.opens("[", "]"):
            return
        while True:
            yield w.value()
            if w.closes("]"):
                return

"""Reading an input file with bounded memory: gzip inflated a chunk at a time under a size
limit, text decoded and handed out a line at a time.

A ``.json.gz`` or ``.log.gz`` of 1.45 MB can inflate to 1.5 GB (a decompression bomb, or a
mistake): inflated whole, it reached 2.95 GB before anything checked it. Here the inflated size
is counted as it grows and refused past :func:`inflate_limit` (``INFLATE_RATIO`` times the
compressed size, at least ``INFLATE_FLOOR``): the largest ratios of real traces and logs are
tens (repeated kernel names, repeated metrics lines), a bomb's are a thousand. Readers that go a
line at a time (:func:`text_lines`: the vLLM log) hold one chunk and one line, whatever the file's
size.
"""

from __future__ import annotations

import codecs
import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mlaprof.errors import MlaprofError

CHUNK = 1 << 20  # bytes read (and inflated) at a time
INFLATE_RATIO = 200.0  # default; MLAPROF_INFLATE_RATIO overrides
INFLATE_FLOOR = 64 << 20  # a small compressed file may always inflate this far
GZIP_MAGIC = b"\x1f\x8b"
_BINARY_PROBE = 65536  # a NUL in the first this many bytes: binary, not text
SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is an SQLite database file (its header, whatever its name)."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def inflate_limit(compressed: int) -> int:
    """The most bytes a gzip file of ``compressed`` bytes may inflate to."""
    raw = os.environ.get("MLAPROF_INFLATE_RATIO", "")
    try:
        ratio = float(raw) if raw else INFLATE_RATIO
    except ValueError:
        raise MlaprofError(f"MLAPROF_INFLATE_RATIO must be a number, got {raw!r}") from None
    if not ratio > 0:
        raise MlaprofError(f"MLAPROF_INFLATE_RATIO must be > 0, got {raw!r}")
    return max(INFLATE_FLOOR, int(ratio * compressed))


def chunks(path: Path) -> Iterator[bytes]:
    """The file's bytes (inflated when gzip), ``CHUNK`` at a time, within the inflate limit."""
    try:
        f: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed below, also on early exit
    except OSError as e:
        raise MlaprofError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        head = f.read(2)
        f.seek(0)
        if head != GZIP_MAGIC:
            while block := _read(f, path):
                yield block
            return
        size = os.fstat(f.fileno()).st_size
        limit = inflate_limit(size)
        total = 0
        with gzip.GzipFile(fileobj=f, mode="rb") as z:
            while True:
                try:
                    block = z.read(CHUNK)
                except (OSError, EOFError, ValueError, zlib.error) as e:
                    raise MlaprofError(f"{path} is not a valid gzip file ({e})") from None
                if not block:
                    return
                total += len(block)
                if total > limit:
                    raise MlaprofError(
                        f"{path} inflates past {limit:,} bytes ({limit / max(size, 1):.0f} times "
                        f"its {size:,} compressed bytes): a decompression bomb? Refused (set "
                        "MLAPROF_INFLATE_RATIO to allow a larger ratio)"
                    )
                yield block
    finally:
        f.close()


def _read(f: BinaryIO, path: Path) -> bytes:
    try:
        return f.read(CHUNK)
    except OSError as e:
        raise MlaprofError(f"cannot read {path}: {e.strerror or e}") from None


def read_bytes(path: Path) -> bytes:
    """The whole (inflated) content, gathered chunk by chunk within the inflate limit."""
    buf = bytearray()
    for block in chunks(path):
        buf += block
    return bytes(buf)


def read_text(path: Path, what: str) -> str:
    """A text file's content (``.gz`` inflated within its limit); binary or undecodable input
    is an error naming the file."""
    raw = read_bytes(path)
    if b"\x00" in raw[:_BINARY_PROBE]:
        raise MlaprofError(f"{path} is binary, not a {what}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MlaprofError(
            f"{path} is not UTF-8 text ({what}): {e.reason} at byte {e.start}"
        ) from None


def text_chunks(path: Path, what: str) -> Iterator[str]:
    """The file's text a chunk at a time, decoded incrementally (a character split between two
    chunks is held back); binary or undecodable input is an error naming the file."""
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset = 0  # bytes decoded before this chunk (for the error's byte position)
    probe = 0
    final = False
    blocks = chunks(path)
    while not final:
        block = next(blocks, None)
        final = block is None
        if block is not None and probe < _BINARY_PROBE:
            if b"\x00" in block[: _BINARY_PROBE - probe]:
                raise MlaprofError(f"{path} is binary, not a {what}")
            probe += len(block)
        try:
            text = decoder.decode(block or b"", final=final)
        except UnicodeDecodeError as e:
            raise MlaprofError(
                f"{path} is not UTF-8 text ({what}): {e.reason} at byte {offset + e.start}"
            ) from None
        offset += len(block or b"")
        if text:
            yield text


def text_lines(path: Path, what: str) -> Iterator[str]:
    """The file's text a line at a time (split at ``\n`` only: a ``\r`` stays in its line,
    as progress bars write them), decoded incrementally: memory is a chunk and a line."""
    pending: list[str] = []  # the pieces of a line that is not ended yet (joined once, at its end)
    for text in text_chunks(path, what):
        start = 0
        while (end := text.find("\n", start)) >= 0:
            pending.append(text[start:end])
            yield "".join(pending)
            pending.clear()
            start = end + 1
        if start < len(text):
            pending.append(text[start:])
    yield "".join(pending)

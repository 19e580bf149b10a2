"""Value checks shared by every importer: one place that decides what a stored number may be.

The store keeps integers as SQLite INTEGER / Arrow int64 and reals as float64, so a value outside
int64, a non-finite real, an interval ending before it starts or a kernel without its three grid
axes is refused here with one line naming the file, the record and the field, instead of a
traceback (OverflowError, KeyError) later or, worse, a silent import. :func:`decoding` turns the
decoders' own failures (zlib, UnicodeDecodeError, RecursionError on deep JSON, the int-digits
limit) into the same kind of line at an importer's boundary.
"""

from __future__ import annotations

import functools
import math
import sqlite3
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from mlaprof import live_inputs
from mlaprof.errors import MlaprofError
from mlaprof.rank_counts import counted

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
GRID_AXES = ("grid_x", "grid_y", "grid_z")
# (start, end) column pairs: an interval may not end before it starts
INTERVALS = (("start_ns", "end_ns"),)

F = TypeVar("F", bound=Callable[..., Any])


def int64(value: int, what: str) -> int:
    """``value`` if it fits a 64-bit signed integer (what SQLite and Arrow store)."""
    if not INT64_MIN <= value <= INT64_MAX:
        shown = str(value) if abs(value) < 10**40 else f"a {len(str(abs(value)))}-digit number"
        raise MlaprofError(f"{what} {shown} does not fit a 64-bit integer")
    return value


def finite(value: float, what: str) -> float:
    if not math.isfinite(value):
        raise MlaprofError(f"{what} {value!r} is not a finite number")
    return value


def _where(source: str, table: str, row: int) -> str:
    return f"{source}: {table} record {row + 1}" if source else f"{table} record {row + 1}"


def rows(table: str, cols: Sequence[str], flat: Sequence[Any], source: str = "") -> None:
    """Check row-major values bound for ``table``: integers in int64, reals finite, end >= start.

    ``flat`` holds ``len(flat) // len(cols)`` rows of ``cols``; strings are left alone (SQLite's
    affinity stores a numeric-looking text as given)."""
    k = len(cols)
    if k == 0 or not flat:
        return
    from mlaprof.store.schema import TABLES  # here: the package's reader pulls in pandas

    types = dict(TABLES[table])
    for j, c in enumerate(cols):
        kind = types.get(c)
        # a BLOB (a rocpd cell of another type) is not a value of any mlaprof column: every
        # reader, exporter and view would have to guess what it means
        for i, v in enumerate(flat[j::k]):
            if isinstance(v, (bytes, bytearray, memoryview)):
                raise MlaprofError(
                    f"{_where(source, table, i)}: field {c} holds binary data ({len(v)} bytes), "
                    "not a number or text"
                )
        if kind not in ("INTEGER", "REAL"):
            continue
        for i, v in enumerate(flat[j::k]):
            if v is None or isinstance(v, str):
                continue
            if isinstance(v, int):
                if not INT64_MIN <= v <= INT64_MAX:
                    int64(v, f"{_where(source, table, i)}: field {c}")
            elif isinstance(v, float) and not math.isfinite(v):
                finite(v, f"{_where(source, table, i)}: field {c}")
    pos = {c: j for j, c in enumerate(cols)}
    for a, b in INTERVALS:
        if a in pos and b in pos:
            ja, jb = pos[a], pos[b]
            for i, (s, e) in enumerate(zip(flat[ja::k], flat[jb::k], strict=True)):
                if isinstance(s, int) and isinstance(e, int) and e < s:
                    raise MlaprofError(f"{_where(source, table, i)}: {b} {e} is before {a} {s}")


def kernel_columns(kc: Any, source: str, first_line: int = 1) -> None:  # annotate.KernelColumns
    """A trace's kernels before annotation: all three grid axes present, 0 <= start <= end.

    ``first_line``: the file line of row 0 (2 for a CSV with a header), for the message."""
    missing = [c for c in ("start_ns", "end_ns", *GRID_AXES) if c not in kc.ints]
    if missing:
        shown = ", ".join(missing)
        raise MlaprofError(f"{source}: kernel records without {shown} (a grid needs x, y and z)")
    if kc.n == 0:
        return
    start, end = kc.ints["start_ns"], kc.ints["end_ns"]
    ok = np.ones(kc.n, bool)
    for c in ("start_ns", "end_ns"):
        m = kc.masks.get(c)
        if m is not None:
            ok &= ~m
    bad = np.flatnonzero(ok & ((start < 0) | (end < start)))
    if len(bad):
        i = int(bad[0])
        what = "a negative start" if start[i] < 0 else f"end {end[i]} before start {start[i]}"
        raise MlaprofError(
            f"{source}: kernel record {i + first_line} has {what} "
            f"({counted(len(bad), 'such record(s)')})"
        )


# decoder failures that mean "this input is damaged", whatever decoder raised them
DECODE_ERRORS: tuple[type[BaseException], ...] = (
    zlib.error,
    EOFError,
    UnicodeError,
    RecursionError,
    OverflowError,
    ValueError,  # json's int-digits limit, int("…"), numpy conversions
    KeyError,
    IndexError,
    TypeError,
    sqlite3.DatabaseError,
    MemoryError,
)


def describe(e: BaseException) -> str:
    """One short line for an exception: its type and the first line of its message."""
    if isinstance(e, RecursionError):
        return "nested too deeply"
    msg = str(e).splitlines()[0] if str(e) else ""
    if isinstance(e, KeyError):
        msg = f"missing field {msg}"
    if len(msg) > 200:
        msg = msg[:200] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


@contextmanager
def decoding(source: object) -> Iterator[None]:
    """Turn any decoder failure inside the block into MlaprofError naming ``source``; where
    ``source`` is a file that moved while it was read or that a writer holds open, the failure
    is the file changing under its reader (:func:`mlaprof.live_inputs.changing`): a trace or
    log still being written is never called malformed or undecodable."""
    path = source if isinstance(source, (str, Path)) else None
    before = live_inputs.stamp(path) if path is not None else None
    try:
        yield
    except live_inputs.FileChanged:
        raise
    except MlaprofError as e:
        if path is not None and str(path) in str(e):  # a failure of this input's content
            _refuse_if_live(path, before, str(e).removeprefix(f"{path}: "))
        raise
    except DECODE_ERRORS as e:
        if path is not None:
            _refuse_if_live(path, before, describe(e))
        raise MlaprofError(f"{source}: cannot be imported ({describe(e)})") from None


def _refuse_if_live(path: str | Path, before: tuple[int, int] | None, found: str) -> None:
    """The changing refusal where the file moved since ``before``; where it held still but a
    writer holds it, the still-written refusal with what the decoder ``found``."""
    if before is None:
        return
    now = live_inputs.stamp(path)
    if now != before:
        grew = now is not None and now[0] != before[0]
        how = f"{before[0]:,} -> {now[0]:,} bytes" if grew else "modified"  # type: ignore[index]
        raise live_inputs.changing(path, how) from None
    if live_inputs.writer_holds(path):
        raise live_inputs.still_written(path, found) from None


def boundary(fn: F) -> F:
    """Decorator for an importer entry point (first argument: the input path)."""

    @functools.wraps(fn)
    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        with decoding(path):
            return fn(path, *args, **kwargs)

    return wrapper  # type: ignore[return-value]

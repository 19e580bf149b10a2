"""Arrow arrays to NumPy without pyarrow's own conversion, which imports pandas (a quarter of a
second, more than parsing a 1M-dispatch file costs) on first use: the values are read from the
array's buffers, which for the fixed-width types an import reads is exact."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

_DTYPES = {
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "double": np.float64,
    "float": np.float32,
}


def _bits(buf: Any, offset: int, n: int) -> np.ndarray:
    """A validity or boolean bitmap as n booleans (Arrow bitmaps are little-endian in bits)."""
    raw = np.frombuffer(buf, np.uint8)
    return np.unpackbits(raw, bitorder="little")[offset : offset + n].astype(bool)


def numbers(arr: Any, fill: int | float | None = None) -> np.ndarray:
    """A fixed-width numeric array (one chunk) as NumPy values; nulls become ``fill`` (required
    when the array holds nulls)."""
    dtype = _DTYPES.get(str(arr.type))
    if dtype is None:
        raise TypeError(f"no NumPy view of Arrow type {arr.type}")
    n, off = len(arr), arr.offset
    buf = arr.buffers()[1]
    values = (
        np.frombuffer(buf, dtype, count=n, offset=off * np.dtype(dtype).itemsize)
        if buf is not None
        else np.zeros(n, dtype)
    )
    if arr.null_count:
        if fill is None:
            raise ValueError("an array with nulls needs a fill value")
        values = np.where(nulls(arr), fill, values)
    return values


def ascending(a: np.ndarray) -> bool:
    """Whether ``a`` never decreases (trace order usually is: callers skip a sort then)."""
    return len(a) < 2 or bool((a[1:] >= a[:-1]).all())


def run_heads(a: np.ndarray) -> np.ndarray:
    """Where the runs of equal values of ``a`` begin (from 0; empty where ``a`` is)."""
    if not len(a):
        return np.zeros(0, np.intp)
    return np.r_[0, np.flatnonzero(a[1:] != a[:-1]) + 1]


def take(col: Any, rows: np.ndarray) -> np.ndarray:
    """Values of a fixed-width numeric array without NULLs, chunked or not, at ``rows``
    (ascending), read through views of each chunk's buffer: nothing is joined or copied but
    the values taken (pyarrow's own take on a chunked array costs more than joining it)."""
    chunks = col.chunks if hasattr(col, "chunks") else [col]
    if col.null_count:
        raise ValueError("take reads arrays without nulls")
    if not ascending(rows):
        raise ValueError("take needs ascending rows")
    bounds = np.cumsum([0] + [len(c) for c in chunks])
    if len(rows) and (rows[0] < 0 or rows[-1] >= bounds[-1]):
        raise IndexError("row out of range")
    cut = np.searchsorted(rows, bounds)
    parts = [
        numbers(ch)[rows[a:b] - lo]
        for ch, lo, a, b in zip(chunks, bounds[:-1], cut[:-1], cut[1:], strict=True)
        if b > a
    ]
    return np.concatenate(parts) if parts else np.zeros(0, _DTYPES[str(col.type)])


def nulls(arr: Any) -> np.ndarray:
    """Where the array is null, as booleans."""
    validity = arr.buffers()[0]
    if validity is None or not arr.null_count:
        return np.zeros(len(arr), bool)
    return ~_bits(validity, arr.offset, len(arr))


def placed(n: int, parts: Iterable[tuple[int, np.ndarray]]) -> np.ndarray:
    """``n`` booleans, each part's (first row, booleans) laid in at its row: the NULL mask of a
    column read a block at a time, assembled once its length is known."""
    out = np.zeros(n, bool)
    for at, part in parts:
        out[at : at + len(part)] = part
    return out


def placed_ranges(
    counts: Sequence[int], parts: Sequence[Iterable[tuple[int, np.ndarray]]]
) -> np.ndarray | None:
    """The NULL mask of a column read as consecutive ranges (``counts[i]`` rows each, read at
    once), each range's (first row in the range, booleans) parts laid in at their rows; None
    where no range holds a NULL."""
    starts = np.cumsum([0, *counts]).tolist()
    laid = [(at + row, m) for at, own in zip(starts, parts, strict=False) for row, m in own]
    return placed(starts[-1], laid) if laid else None


def array(values: np.ndarray, arrow_type: Any, mask: np.ndarray | None = None) -> Any:
    """A NumPy array of a fixed-width type as an Arrow array of ``arrow_type`` (``mask``: True
    where null), built from its buffers (``pyarrow.array`` on NumPy input imports pandas)."""
    import pyarrow as pa

    dtype = _DTYPES.get(str(arrow_type))
    if dtype is None:
        raise TypeError(f"no NumPy view of Arrow type {arrow_type}")
    data = np.ascontiguousarray(values, dtype=dtype)
    n = len(data)
    validity = None
    nulls = 0
    if mask is not None:
        m = np.asarray(mask, bool)
        nulls = int(np.count_nonzero(m))
        if nulls:
            validity = pa.py_buffer(np.packbits(~m, bitorder="little"))
    return pa.Array.from_buffers(arrow_type, n, [validity, pa.py_buffer(data)], null_count=nulls)


def strings(values: Sequence[str | None]) -> Any:
    """Python strings (None: null) as an Arrow string array, built from its buffers (no pandas)."""
    return coded_strings(values, np.arange(len(values)))


class Coded(NamedTuple):
    """A string column given as codes into its distinct values (``values[codes]``: a rank's
    kernel names by name index), for :func:`table`."""

    values: Sequence[str | None]
    codes: np.ndarray


def coded_strings(values: Sequence[str | None], codes: np.ndarray) -> Any:
    """``values[codes]`` as an Arrow string array, built a run of equal codes at a time (a
    histogram sorted by name has one run a name): the same array as :func:`strings` of the
    decoded list, without a Python string per row (:func:`strings`: every code its own run)."""
    import pyarrow as pa

    codes = np.asarray(codes, np.int64)
    n = len(codes)
    heads = run_heads(codes)
    reps = np.diff(np.append(heads, n))
    run_values = [values[c] for c in codes[heads].tolist()]
    encoded = [b"" if v is None else v.encode("utf-8") for v in run_values]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.repeat(np.array([len(b) for b in encoded], np.int64), reps), out=offsets[1:])
    data = b"".join(b * r for b, r in zip(encoded, reps.tolist(), strict=True))
    missing = np.repeat(np.array([v is None for v in run_values], bool), reps)
    nulls = int(missing.sum())
    validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def table(columns: dict[str, Any]) -> Any:
    """NumPy columns (fixed-width or bool) and lists of strings as an Arrow table, the types
    ``pyarrow.table`` would infer, built from buffers (``pyarrow.table`` on them loads pandas)."""
    import pyarrow as pa

    arrays = []
    for values in columns.values():
        if isinstance(values, list):
            arrays.append(strings(values))
            continue
        if isinstance(values, Coded):
            arrays.append(coded_strings(values.values, values.codes))
            continue
        v = np.asarray(values)
        if v.dtype == bool:
            bits = pa.py_buffer(np.packbits(v, bitorder="little"))
            arrays.append(pa.Array.from_buffers(pa.bool_(), len(v), [None, bits]))
            continue
        alias = next((a for a, d in _DTYPES.items() if np.dtype(d) == v.dtype), None)
        if alias is None:
            raise TypeError(f"no Arrow type for NumPy dtype {v.dtype}")
        arrays.append(array(v, pa.type_for_alias(alias)))
    return pa.Table.from_arrays(arrays, names=list(columns))

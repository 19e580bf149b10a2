"""Columns an import parks while it annotates: a kernel trace's columns that nothing reads in full
before the store writes them (streams, graph node ids, grids and blocks: half of a 10M-dispatch
trace's memory), held in memory as the smallest integers that hold them while they fit a budget,
else kept as a temporary Parquet file beside nothing else, and read back a column or a batch at
a time. The file is removed when its :class:`Spill` is collected."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError, disk_message
from mlaprof.formats import arrow_numpy

NULL = -1
# bytes of narrowed columns the spills of a process keep in memory, together, before a spill
# moves to its file: a 1M-dispatch trace's streams, grids and blocks fit in ~10 MB as the
# smallest integers that hold them, so its import skips the file's write and read back; a
# bigger trace, or the ranks a fleet import reads ahead past the first, go to disk as before
MEMORY_BUDGET = 32 << 20
# rows per write (one row group) once a spill is on disk: ~64k rows of 8 int64 columns, 4 MB
FILE_ROWS = 1 << 16
_LOCK = threading.Lock()
_HELD = [0]  # bytes held in memory by every live spill of this process


def _release(cell: list[int]) -> None:
    """Give a spill's held bytes back to the process budget (once: the cell is zeroed)."""
    with _LOCK:
        _HELD[0] -= cell[0]
        cell[0] = 0


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _narrow(parts: Sequence[np.ndarray]) -> np.ndarray:
    """``parts`` (int64, NULL as -1) joined, copied once into the smallest signed integer type
    that holds them (never an int64 join first: a parsed block's column is one part)."""
    n = sum(len(a) for a in parts)
    if not n:
        return np.zeros(0, np.int8)
    lo = min(int(a.min()) for a in parts if len(a))
    hi = max(int(a.max()) for a in parts if len(a))
    dtype = np.dtype(np.int64)  # a copy even so: a view would keep the parsed batch alive
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            dtype = np.dtype(t)
            break
    out = np.empty(n, dtype)
    at = 0
    for a in parts:
        out[at : at + len(a)] = a
        at += len(a)
    return out


class Spill:
    """int64 columns appended batch by batch (:meth:`append`), then read back (:meth:`column`,
    :meth:`take`, :meth:`batches`) once :meth:`close` has ended the appends. Held in memory,
    narrowed, while the process's spills hold at most ``budget`` bytes together
    (:data:`MEMORY_BUDGET`); past it, every row so far and the rest go to a temporary Parquet
    file (``path``, None while in memory)."""

    def __init__(self, columns: Sequence[str], budget: int | None = None) -> None:
        import pyarrow as pa

        self.columns = list(columns)
        self.schema = pa.schema([pa.field(c, pa.int64()) for c in self.columns])
        self.path: str | None = None
        self._finalizer: Any = None
        self._writer: Any = None
        self._budget = MEMORY_BUDGET if budget is None else budget
        self._held: list[dict[str, np.ndarray]] | None = []  # narrowed batches, in memory
        self._held_bytes = [0]  # this spill's share of the process budget
        weakref.finalize(self, _release, self._held_bytes)
        self.n = 0
        self._nulls: dict[str, list[tuple[int, np.ndarray]]] = {}  # column -> (at, mask) parts
        self._pending: list[Any] = []  # rows for the file not yet written (< FILE_ROWS)
        self._pending_rows = 0

    def append(self, batch: Any) -> None:
        """Rows of every column (a record batch or table holding them, int64)."""
        part = batch.select(self.columns)
        chunks = {}
        nulls = []
        for c in self.columns:
            col = part.column(c)
            chunks[c] = col.chunks if hasattr(col, "chunks") else [col]
            if col.null_count:
                nulls.append((c, np.concatenate([arrow_numpy.nulls(a) for a in chunks[c]])))
        if self._held is not None:
            held = {c: _narrow([arrow_numpy.numbers(a, NULL) for a in parts])
                    for c, parts in chunks.items()}  # fmt: skip
            size = sum(a.nbytes for a in held.values())
            with _LOCK:
                fits = _HELD[0] + size <= self._budget
                if fits:
                    _HELD[0] += size
                    self._held_bytes[0] += size
            if fits:
                self._held.append(held)
            else:
                self._to_disk()  # the rows so far (their NULLs known), then this batch
        if self._held is None:
            self._buffer(_table(part, self.schema))
        for c, m in nulls:
            self._nulls.setdefault(c, []).append((self.n, m))
        self.n += part.num_rows

    def _to_disk(self) -> None:
        """Past the budget: the rows held so far become the file's first rows."""
        held, self._held = self._held or [], None
        for b in self._batches_of(held, self.masks()):
            self._buffer(b)
        _release(self._held_bytes)

    def _buffer(self, table: Any) -> None:
        """Rows for the file, written :data:`FILE_ROWS` at a time: a row group per parsed block
        (a few thousand rows) cost more to write and read back than the rows themselves."""
        self._pending.append(table)
        self._pending_rows += table.num_rows
        if self._pending_rows >= FILE_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._pending:
            return
        parts = [pa.Table.from_batches([t], schema=self.schema) if isinstance(t, pa.RecordBatch)
                 else t for t in self._pending]  # fmt: skip
        self._pending, self._pending_rows = [], 0
        self._write(pa.concat_tables(parts).combine_chunks())

    def _write(self, table: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            if self._writer is None:
                fd, self.path = tempfile.mkstemp(prefix="mlaprof-spill-", suffix=".parquet")
                os.close(fd)
                self._finalizer = weakref.finalize(self, _remove, self.path)
                self._writer = pq.ParquetWriter(self.path, self.schema, compression="lz4")
            if isinstance(table, pa.RecordBatch):
                table = pa.Table.from_batches([table], schema=self.schema)
            self._writer.write_table(table)
        except OSError as e:
            where = os.path.dirname(self.path) if self.path else tempfile.gettempdir()
            raise MlaprofError(
                f"cannot write a temporary file in {where}: {disk_message(e, where)}"
            ) from None

    def _batches_of(
        self, held: list[dict[str, np.ndarray]], masks: dict[str, np.ndarray]
    ) -> Iterator[Any]:
        """Held batches as Arrow record batches (int64, their NULLs back)."""
        import pyarrow as pa

        at = 0
        for b in held:
            rows = len(b[self.columns[0]]) if self.columns else 0
            arrays = []
            for c in self.columns:
                m = masks.get(c)
                m = m[at : at + rows] if m is not None and m[at : at + rows].any() else None
                arrays.append(arrow_numpy.array(b[c].astype(np.int64), pa.int64(), m))
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)
            at += rows

    def close(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def masks(self) -> dict[str, np.ndarray]:
        """Per column holding NULLs: where (n booleans)."""
        return {c: arrow_numpy.placed(self.n, parts) for c, parts in self._nulls.items()}

    def null_columns(self) -> set[str]:
        """The columns holding a NULL (known from the appends, nothing read back)."""
        return set(self._nulls)

    def _file(self) -> Any:
        import pyarrow.parquet as pq

        if self._writer is not None:
            raise MlaprofError("internal: a spill is read before it is closed")
        return pq.ParquetFile(self.path, memory_map=True)

    def _parts(self, c: str) -> Iterator[np.ndarray]:
        """Column ``c`` a batch at a time (NULL as -1), from memory or the file."""
        if self._held is not None:
            yield from (b[c] for b in self._held)
            return
        if self.path is None:
            return
        for b in self._file().iter_batches(columns=[c]):
            yield arrow_numpy.numbers(b.column(0), NULL)

    def column(self, c: str) -> np.ndarray:
        """The whole column as int64 (NULL as -1)."""
        if self.n == 0:
            return np.zeros(0, np.int64)
        parts = [p.astype(np.int64, copy=False) for p in self._parts(c)]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def take(self, c: str, rows: np.ndarray) -> np.ndarray:
        """The column at ``rows`` (ascending), NULL as -1, read a batch at a time."""
        out = np.full(len(rows), NULL, np.int64)
        if not len(rows) or self.n == 0:
            return out
        lo = 0
        for vals in self._parts(c):
            hi = lo + len(vals)
            a, z = np.searchsorted(rows, [lo, hi])
            if z > a:
                out[a:z] = vals[rows[a:z] - lo]
            lo = hi
        return out

    def batches(self, size: int) -> Iterator[Any]:
        """The rows as Arrow tables of exactly ``size`` rows (the last one fewer), in order."""
        yield from _regroup(self.record_batches(size), size, self.schema)

    def record_batches(self, size: int) -> Iterator[Any]:
        """The rows as record batches as they are held or stored (about ``size`` rows each)."""
        if self.n == 0:
            return iter(())
        if self._held is not None:
            return self._batches_of(self._held, self.masks())
        return self._file().iter_batches(batch_size=size)

    def discard(self) -> None:
        """Free the rows: the memory held, the file removed (also done when the spill is
        collected)."""
        self.close()
        self._held = [] if self._held is not None else None
        _release(self._held_bytes)
        if self._finalizer is not None:
            self._finalizer()


def _regroup(source: Iterable[Any], size: int, schema: Any) -> Iterator[Any]:
    """Record batches of any sizes as tables of exactly ``size`` rows (the last one fewer)."""
    import pyarrow as pa

    held: list[Any] = []
    count = 0
    for b in source:
        held.append(b)
        count += b.num_rows
        while count >= size:
            tab = pa.Table.from_batches(held, schema=schema)
            yield tab.slice(0, size)
            rest = tab.slice(size)
            held, count = rest.to_batches(), rest.num_rows
    if count:
        yield pa.Table.from_batches(held, schema=schema)


class SpillChain:
    """Spills of consecutive rows read back as one: a kernel file parsed as several byte ranges
    at once gives each range its own :class:`Spill` (a range cannot know where its rows start
    until the ranges before it are parsed). Reads as :class:`Spill` does, the ranges in order."""

    def __init__(self, parts: Sequence[Spill]) -> None:
        if not parts:
            raise MlaprofError("internal: a spill chain of no spills")
        self.parts = list(parts)
        self.columns = list(parts[0].columns)
        self.schema = parts[0].schema
        self.n = sum(p.n for p in parts)

    def close(self) -> None:
        for p in self.parts:
            p.close()

    def null_columns(self) -> set[str]:
        return set().union(*(p.null_columns() for p in self.parts))

    def masks(self) -> dict[str, np.ndarray]:
        got = [p.masks() for p in self.parts]
        out = {}
        for c in {c for m in got for c in m}:
            out[c] = np.concatenate(
                [m.get(c, np.zeros(p.n, bool)) for m, p in zip(got, self.parts, strict=True)]
            )
        return out

    def column(self, c: str) -> np.ndarray:
        return np.concatenate([p.column(c) for p in self.parts])

    def take(self, c: str, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), NULL, np.int64)
        lo = 0
        for p in self.parts:
            hi = lo + p.n
            a, z = np.searchsorted(rows, [lo, hi])
            if z > a:
                out[a:z] = p.take(c, rows[a:z] - lo)
            lo = hi
        return out

    def batches(self, size: int) -> Iterator[Any]:
        parts = (b for p in self.parts for b in p.record_batches(size))
        yield from _regroup(parts, size, self.schema)

    def discard(self) -> None:
        for p in self.parts:
            p.discard()


def _table(part: Any, schema: Any) -> Any:
    import pyarrow as pa

    if isinstance(part, pa.RecordBatch):
        return pa.Table.from_batches([part], schema=schema)
    return part.cast(schema)

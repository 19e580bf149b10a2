"""Columns an import parks on disk while it annotates: a kernel trace's columns that nothing reads
in full before the store writes them (streams, graph node ids, grids and blocks: half of a
10M-dispatch trace's memory), kept as a temporary Parquet file beside nothing else and read back
a column or a batch at a time. The file is removed when its :class:`Spill` is collected."""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mlaprof.errors import MlaprofError, disk_message
from mlaprof.formats import arrow_numpy

NULL = -1


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class Spill:
    """int64 columns appended batch by batch (:meth:`append`), then read back (:meth:`column`,
    :meth:`take`, :meth:`batches`) once :meth:`close` has written the file's footer."""

    def __init__(self, columns: Sequence[str]) -> None:
        import pyarrow as pa

        self.columns = list(columns)
        self.schema = pa.schema([pa.field(c, pa.int64()) for c in self.columns])
        fd, self.path = tempfile.mkstemp(prefix="mlaprof-spill-", suffix=".parquet")
        os.close(fd)
        self._finalizer = weakref.finalize(self, _remove, self.path)
        self._writer: Any = None
        self.n = 0
        self._nulls: dict[str, list[tuple[int, np.ndarray]]] = {}  # column -> (at, mask) parts

    def append(self, batch: Any) -> None:
        """Rows of every column (a record batch or table holding them, int64)."""
        import pyarrow.parquet as pq

        part = batch.select(self.columns)
        for c in self.columns:
            col = part.column(c)
            if col.null_count:
                arr = col.combine_chunks() if hasattr(col, "combine_chunks") else col
                self._nulls.setdefault(c, []).append((self.n, arrow_numpy.nulls(arr)))
        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(self.path, self.schema, compression="lz4")
            self._writer.write_table(_table(part, self.schema))
        except OSError as e:
            raise MlaprofError(
                f"cannot write a temporary file in {os.path.dirname(self.path)}: "
                f"{disk_message(e, os.path.dirname(self.path))}"
            ) from None
        self.n += part.num_rows

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def masks(self) -> dict[str, np.ndarray]:
        """Per column holding NULLs: where (n booleans)."""
        out = {}
        for c, parts in self._nulls.items():
            m = np.zeros(self.n, bool)
            for at, part in parts:
                m[at : at + len(part)] = part
            out[c] = m
        return out

    def _file(self) -> Any:
        import pyarrow.parquet as pq

        if self._writer is not None:
            raise MlaprofError("internal: a spill is read before it is closed")
        return pq.ParquetFile(self.path, memory_map=True)

    def column(self, c: str) -> np.ndarray:
        """The whole column as int64 (NULL as -1)."""
        if self.n == 0:
            return np.zeros(0, np.int64)
        parts = [
            arrow_numpy.numbers(b.column(0), NULL).astype(np.int64, copy=False)
            for b in self._file().iter_batches(columns=[c])
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def take(self, c: str, rows: np.ndarray) -> np.ndarray:
        """The column at ``rows`` (ascending), NULL as -1, read a batch at a time."""
        out = np.full(len(rows), NULL, np.int64)
        if not len(rows) or self.n == 0:
            return out
        lo = 0
        for b in self._file().iter_batches(columns=[c]):
            hi = lo + b.num_rows
            a, z = np.searchsorted(rows, [lo, hi])
            if z > a:
                vals = arrow_numpy.numbers(b.column(0), NULL)
                out[a:z] = vals[rows[a:z] - lo]
            lo = hi
        return out

    def batches(self, size: int) -> Iterator[Any]:
        """The rows as Arrow tables of exactly ``size`` rows (the last one fewer), in order."""
        import pyarrow as pa

        if self.n == 0:
            return
        held: list[Any] = []
        count = 0
        for b in self._file().iter_batches(batch_size=size):
            held.append(b)
            count += b.num_rows
            while count >= size:
                tab = pa.Table.from_batches(held)
                yield tab.slice(0, size)
                rest = tab.slice(size)
                held, count = rest.to_batches(), rest.num_rows
        if count:
            yield pa.Table.from_batches(held, schema=self.schema)

    def discard(self) -> None:
        """Remove the file now (also done when the spill is collected)."""
        self.close()
        self._finalizer()


def _table(part: Any, schema: Any) -> Any:
    import pyarrow as pa

    if isinstance(part, pa.RecordBatch):
        return pa.Table.from_batches([part], schema=schema)
    return part.cast(schema)

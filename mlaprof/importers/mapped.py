"""A byte range of a file as a read-only stream over a memory map, for pyarrow's CSV reader.

Reading a file with ``read()`` copies every byte from the page cache into the process: on the
2-core machine that copy was as much system time as the parse's own user time (0.3-0.8 s per
277 MB rank file). A map hands pyarrow the page cache's own pages (each ``read`` returns a
``memoryview`` slice, which pyarrow wraps without a copy). Mapped pages count towards the
process's resident set, so the pages a parse is done with are handed back
(``madvise(MADV_DONTNEED)``): the map is of a read-only file, so a later touch of such a page
reads it again from the file, never zeros, and handing back too early costs time, never
correctness. A file that cannot be mapped (empty, a pipe) is read with ``pread``.

A map is only safe while the file keeps its length: a page past a new, shorter end raises
SIGBUS, which kills the process (a trace rewritten or truncated while it is imported). So a
range is mapped only under a read lease (Linux ``fcntl(F_SETLEASE, F_RDLCK)``, fcntl(2)
"Leases"): another process that opens the file for writing or truncates it then waits until
the range is closed (at most ``/proc/sys/fs/lease-break-time`` seconds), and the parse reads
the file as it was, whole. Where no lease can be taken (the file is open for writing, e.g.
still being written; another user's file; a filesystem without leases; not Linux) the range
is read with ``pread``, which a shorter file answers with fewer bytes: the range then refuses
with :class:`FileChanged`, never a torn parse. A range refused its lease because a writer has the
file open (``writer_open``) can tell whether the file moved while it was read (:meth:`moved`):
the parser then refuses it as changing instead of calling a half-written row malformed.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path

from mlaprof.live_inputs import changing, read_lease

# pages handed back in steps of at least this many bytes (one madvise call per step)
RELEASE_STEP = 16 << 20


class MappedRange:
    """Bytes ``start`` to ``end`` of ``path`` as a stream: ``read`` returns views of a memory
    map; :meth:`parsed` hands back the pages before a position the reader has passed."""

    closed = False

    def __init__(self, path: Path, start: int, end: int) -> None:
        self.path, self._at, self._end = path, start, end
        self._map: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._fd = os.open(path, os.O_RDONLY)
        leased = read_lease(self._fd) if end > start else False
        self.writer_open = leased is None  # a writer has the file open: it may be changing
        self._stamp = self._now()
        # mapped only under a lease taken before the length is checked: from then on no one
        # shortens the file under the map (the fd, and with it the lease, is kept until close)
        if leased:
            self._check_length()
            try:
                self._map = mmap.mmap(self._fd, end, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # not mappable: read() copies instead
                self._map = None
        if self._map is not None:
            self._view = memoryview(self._map)
        self._base = start - start % mmap.PAGESIZE
        self._released = self._base

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return False

    def read(self, size: int | None = -1) -> bytes | memoryview:
        left = self._end - self._at
        want = left if size is None or size < 0 else min(size, left)
        if want <= 0:
            return b""
        at = self._at
        got = self._view[at : at + want] if self._view is not None else os.pread(self._fd, want, at)
        if len(got) < want:  # read() gives the whole request up to the range's end
            self._check_length()
        self._at = at + len(got)
        return got

    def _now(self) -> tuple[int, int]:
        st = os.fstat(self._fd)
        return st.st_size, st.st_mtime_ns

    def moved(self) -> bool:
        """The file's size or modification time moved since the range was opened."""
        return not self.closed and self._now() != self._stamp

    def _check_length(self) -> None:
        """Refuse a file that no longer reaches the range's end."""
        size = os.fstat(self._fd).st_size
        if size < self._end:
            raise changing(self.path, f"now {size:,} bytes, was at least {self._end:,}")

    def parsed(self, nbytes: int) -> None:
        """The reader is done with the range's first ``nbytes``: hand their pages back."""
        if self._map is None or not hasattr(self._map, "madvise"):
            return
        upto = min(self._base + nbytes, self._end)
        upto -= upto % mmap.PAGESIZE
        if upto - self._released >= RELEASE_STEP:
            self._map.madvise(mmap.MADV_DONTNEED, self._released, upto - self._released)
            self._released = upto

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._map is not None:
            # pyarrow may still hold a view: then the map goes with the last one
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

"""The memory-mapped byte range pyarrow's CSV reader parses: the exact bytes of its range in any
read sizes, pages handed back only behind the parse and only in steps, and the same bytes after
pages were handed back (the map is of a read-only file: a touch reads them again)."""

from __future__ import annotations

import mmap
import os
import signal
from pathlib import Path

import pytest

from mlaprof.importers import mapped
from mlaprof.importers.mapped import MappedRange
from mlaprof.live_inputs import FileChanged


def _file(tmp_path: Path, size: int) -> tuple[Path, bytes]:
    data = bytes((i * 7 + i // 251) % 256 for i in range(size))
    p = tmp_path / "f.csv"
    p.write_bytes(data)
    return p, data


def _drain(r: MappedRange, size: int) -> bytes:
    out = bytearray()
    while chunk := r.read(size):
        out += bytes(chunk)
    return bytes(out)


@pytest.mark.parametrize("start,end", [(0, 300_000), (4097, 250_001), (123, 124), (9, 9)])
@pytest.mark.parametrize("size", [1, 4096, 65_537, -1])
def test_reads_exactly_its_range(tmp_path: Path, start: int, end: int, size: int) -> None:
    p, data = _file(tmp_path, 300_000)
    r = MappedRange(p, start, end)
    try:
        got = _drain(r, size) if size > 0 or end == start else bytes(r.read(size))
        assert got == data[start:end]
        assert r.read(10) == b""
    finally:
        r.close()


class _Recording:
    """The real map, its ``madvise`` calls recorded."""

    def __init__(self, real: mmap.mmap) -> None:
        self.real, self.calls = real, []

    def madvise(self, *args: int) -> None:
        self.calls.append(args)
        self.real.madvise(*args)

    def close(self) -> None:
        self.real.close()


@pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="no madvise on this platform")
def test_pages_handed_back_behind_the_parse_in_steps(tmp_path: Path, monkeypatch) -> None:
    if not _leases(tmp_path):
        pytest.skip("no file leases on this filesystem: ranges are read, not mapped")
    monkeypatch.setattr(mapped, "RELEASE_STEP", 8 * mmap.PAGESIZE)
    p, data = _file(tmp_path, 40 * mmap.PAGESIZE + 123)
    start = 3 * mmap.PAGESIZE + 17
    r = MappedRange(p, start, len(data))
    rec = r._map = _Recording(r._map)  # type: ignore[assignment]
    try:
        r.parsed(7 * mmap.PAGESIZE)  # below one step: nothing handed back yet
        assert rec.calls == []
        r.parsed(8 * mmap.PAGESIZE + 100)  # the range's page-aligned start to a page boundary
        base = 3 * mmap.PAGESIZE
        assert rec.calls == [(mmap.MADV_DONTNEED, base, 8 * mmap.PAGESIZE)]
        r.parsed(8 * mmap.PAGESIZE + 200)  # no step further: no call
        r.parsed(10**9)  # never past the range's end
        last = rec.calls[-1]
        assert len(rec.calls) == 2 and last[1] == base + 8 * mmap.PAGESIZE
        assert last[1] + last[2] <= len(data)
        # handed back before they were read: the bytes come again from the file
        assert _drain(r, 5000) == data[start:]
    finally:
        r.close()


def test_an_unmappable_range_is_read(tmp_path: Path) -> None:
    p = tmp_path / "empty.csv"
    p.write_bytes(b"")
    r = MappedRange(p, 0, 0)
    assert r._map is None and r.read(-1) == b""
    r.parsed(10**6)  # nothing to hand back, no error
    r.close()
    r.close()  # twice is harmless


def test_close_while_pyarrow_holds_a_view(tmp_path: Path) -> None:
    p, data = _file(tmp_path, 70_000)
    r = MappedRange(p, 0, len(data))
    view = r.read(1000)
    r.close()  # the map stays while the view lives: no BufferError, no dangling memory
    assert bytes(view) == data[:1000]
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    del view
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds


def test_a_file_that_will_not_map_is_read_with_pread(tmp_path: Path, monkeypatch) -> None:
    p, data = _file(tmp_path, 100_000)

    def refuse(*a: object, **k: object) -> mmap.mmap:
        raise OSError("no map here")

    monkeypatch.setattr(mapped.mmap, "mmap", refuse)
    r = MappedRange(p, 777, 90_001)
    try:
        assert r._map is None
        assert _drain(r, 4096) == data[777:90_001]
        r.parsed(10**6)  # nothing mapped: nothing to hand back
    finally:
        r.close()


def _leases(tmp_path: Path) -> bool:
    """Whether this filesystem grants this process a read lease (Linux, the file's owner),
    asked of the kernel directly (not through the code under test)."""
    try:
        import fcntl
    except ImportError:
        return False
    p = tmp_path / "lease-probe"
    p.write_bytes(b"x")
    fd = os.open(p, os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)


def test_a_file_shortened_under_a_range_read_without_a_lease_is_refused(tmp_path: Path) -> None:
    """A file open for writing elsewhere (still being written) gets no lease: its range is read
    with pread, and a truncation the reader runs into is one clear error, never a torn parse."""
    import pyarrow.csv as pcsv

    rows = b"".join(b"%d,%d\n" % (i, i * 3) for i in range(200_000))
    p = tmp_path / "k.csv"
    p.write_bytes(b"a,b\n" + rows)
    size = p.stat().st_size
    with open(p, "ab"):  # the writer's handle: no read lease while it is open
        r = MappedRange(p, 0, size)
        try:
            assert r._map is None
            reader = pcsv.open_csv(
                r, read_options=pcsv.ReadOptions(block_size=1 << 16, use_threads=False)
            )
            reader.read_next_batch()
            os.truncate(p, size // 3)
            with pytest.raises(FileChanged, match=r"changed while it was read \(now "):
                for _ in reader:
                    pass
        finally:
            r.close()


def test_a_file_shorter_than_its_range_when_mapped_is_refused(tmp_path: Path) -> None:
    """Shortened between the size the reader planned with and the map: refused at once (a map
    past the end would be a SIGBUS on the first touch)."""
    if not _leases(tmp_path):
        pytest.skip("no file leases on this filesystem")
    p, data = _file(tmp_path, 5 * mmap.PAGESIZE)
    with pytest.raises(FileChanged, match="was at least"):
        MappedRange(p, 0, len(data) + 3 * mmap.PAGESIZE)


def test_a_process_that_handles_sigurg_takes_no_lease(tmp_path: Path) -> None:
    """The lease-break notice is SIGURG (ignored by default; SIGIO would end the process): where
    the process handles SIGURG itself, the range takes no lease and reads with pread."""
    p, data = _file(tmp_path, 3 * mmap.PAGESIZE)
    old = signal.signal(signal.SIGURG, lambda *_: None)
    try:
        r = MappedRange(p, 0, len(data))
        try:
            assert r._map is None and _drain(r, 1000) == data
        finally:
            r.close()
    finally:
        signal.signal(signal.SIGURG, old)

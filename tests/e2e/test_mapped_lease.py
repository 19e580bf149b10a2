"""A kernel trace truncated while it is imported: the mapped range's read lease holds the
truncating process until the range is closed, so the parse reads the file whole and the import
never dies of SIGBUS (mlaprof.importers.mapped). A second process is the point, so this is an
end-to-end test."""

from __future__ import annotations

import fcntl
import mmap
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlaprof.importers.mapped import MappedRange
from tests.unit.test_mapped_range import _drain, _file, _leases

_TRUNCATE = "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]))"


def test_a_file_truncated_during_the_parse_waits_for_the_mapped_range(tmp_path: Path) -> None:
    """A rocprofv3 CSV truncated while it was imported killed the import with SIGBUS (a mapped
    page past the new end). The range holds a read lease: the truncating process waits until the
    range is closed, and the range reads the file as it was, whole."""
    if not _leases(tmp_path):
        pytest.skip("no file leases on this filesystem")
    p, data = _file(tmp_path, 64 * mmap.PAGESIZE + 5)
    r = MappedRange(p, 0, len(data))
    child = None
    try:
        assert r._map is not None and fcntl.fcntl(r._fd, fcntl.F_GETLEASE) == fcntl.F_RDLCK
        child = subprocess.Popen([sys.executable, "-c", _TRUNCATE, str(p), "10"])
        # the child's truncate breaks the lease: the kernel says so (the lease's target turns
        # F_UNLCK) and holds the child until the range lets go
        deadline = time.monotonic() + 60
        while fcntl.fcntl(r._fd, fcntl.F_GETLEASE) != fcntl.F_UNLCK:
            if child.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the truncate was not held (exit {child.poll()})")
            time.sleep(0.01)
        assert _drain(r, 4096) == data  # every page, as it was
        assert child.poll() is None and p.stat().st_size == len(data)
    finally:
        r.close()
        if child is not None:
            assert child.wait(timeout=60) == 0
    assert p.stat().st_size == 10  # the writer went on once the range was closed

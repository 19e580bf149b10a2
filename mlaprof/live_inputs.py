"""Inputs that may still be written: a read lease on a file, whether a writer holds one open,
and the one refusal of an input that changed under its reader.

A read lease (Linux ``fcntl(F_SETLEASE, F_RDLCK)``, fcntl(2) "Leases") makes a process that opens
the file for writing or truncates it wait until the lease is released (at most
``/proc/sys/fs/lease-break-time`` seconds); the kernel grants none while any process has the file
open for writing (EAGAIN), which is how :func:`writer_holds` tells a file still being written.
The lease-break notice is sent as SIGURG, whose default action is to ignore it (the default,
SIGIO, would end the process); a process that handles SIGURG itself takes no lease.
"""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

from mlaprof.errors import MlaprofError


class FileChanged(MlaprofError):
    """An input that changed while it was read (rewritten, truncated), or that did not read while
    a writer still holds it open: refused as not yet written, never called malformed."""


WAIT = "a profiler still writing it?): import it once its writer has finished"


def changing(path: Path | str, detail: str = "") -> FileChanged:
    """The one refusal of an input that changed under its reader (``detail``: how it changed)."""
    how = f"{detail}; " if detail else ""
    return FileChanged(f"{path} changed while it was read ({how}{WAIT}")


def still_written(path: Path | str, found: str = "") -> FileChanged:
    """The refusal of an input that did not read while another process holds it open for
    writing but did not move: the data shows a writer, not a change (``found``: what the reader
    found in it as it stands, so a file an idle writer holds still says what is wrong)."""
    seen = f"; as it stands: {found}" if found else ""
    return FileChanged(f"{path} is still open for writing by another process ({WAIT}{seen}")


def read_lease(fd: int) -> bool | None:
    """A read lease on ``fd``'s file, where one can be taken: True; None where a writer has
    the file open; False otherwise (not Linux, not the file's owner, no leases there, a process
    that handles SIGURG)."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return False
    if not hasattr(fcntl, "F_SETLEASE") or signal.getsignal(signal.SIGURG) not in (
        signal.SIG_DFL,
        signal.SIG_IGN,
    ):
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
    except BlockingIOError:  # EAGAIN: open for writing elsewhere
        return None
    except OSError:  # not ours (EACCES), or no leases on this filesystem
        return False
    return True


def writer_holds(path: Path | str) -> bool:
    """Whether another process has the regular file ``path`` open for writing (False where
    that cannot be told: not Linux, another user's file, no leases there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return read_lease(fd) is None
    finally:
        os.close(fd)  # releases a lease taken to ask


def stamp(path: Path | str) -> tuple[int, int] | None:
    """Size and modification time of the regular file ``path`` (None for anything else)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None

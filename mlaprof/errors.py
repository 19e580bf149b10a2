"""User-facing errors: one clear line, exit code 2, never a traceback."""

from __future__ import annotations


class MlaprofError(Exception):
    """A problem with the user's input (arguments, files, shapes, metadata).

    The CLI prints ``mlaprof: error: <message>`` on stderr and exits with code 2.
    """

    exit_code = 2


class MissingExtraError(MlaprofError):
    """An optional integration is not installed; the message says what to install."""

    def __init__(self, what: str, extra: str, detail: str = "") -> None:
        # mlaprof is installed from a clone (it is not on the package index)
        hint = (
            f"pip install -e '.[{extra}]' in the mlaprof checkout"
            if extra
            else "pip install -e . in the mlaprof checkout (a core dependency is missing)"
        )
        msg = f"{what} is not available: install it with {hint}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class Terminated(KeyboardInterrupt):
    """SIGTERM (or another terminating signal) arrived: unwind like Ctrl-C so cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# the stop signals the CLI's handlers saw during the command that is running: a handler's
# exception raised inside a C callback (an SQLite progress handler) is swallowed there, and a
# worker thread never sees it, so long-running C work checks this instead. The window opens when
# the command installs its handlers (clear_signals), not when a worker starts its read: a signal
# that came while a worker was still importing its driver must stop that worker's read too.
_received: list[int] = []


def clear_signals() -> None:
    """A new command starts: the signals an earlier one saw were handled by it."""
    _received.clear()


def note_signal(signum: int) -> None:
    _received.append(signum)


def signal_received() -> int | None:
    """The last stop signal noted during the running command, if any."""
    return _received[-1] if _received else None


def stop_exception(signum: int) -> KeyboardInterrupt:
    """What a stop signal raises: KeyboardInterrupt for SIGINT, Terminated for the others."""
    import signal

    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _disk_full(path: object) -> bool:
    """Whether the file system holding ``path`` has no space left for an unprivileged write."""
    import os

    try:
        st = os.statvfs(str(path))
    except (OSError, TypeError, ValueError):
        return False
    return st.f_bavail * st.f_frsize < 64 * 1024


def disk_message(e: BaseException, path: object = None) -> str:
    """An OS or SQLite failure as one line, saying "disk full" whenever the disk is: SQLite
    reports a write that ran out of space as "database or disk is full" or, mid-page, as a
    "malformed" image, which misleads when the truth is a full disk."""
    import errno

    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return "disk full (no space left on the device)"
    text = str(e.strerror or e) if isinstance(e, OSError) else str(e)
    if "disk is full" in text or (path is not None and _disk_full(path)):
        return f"disk full (no space left on the device; {text})"
    return text

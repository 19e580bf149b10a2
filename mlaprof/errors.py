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
        hint = f"pip install 'mlaprof[{extra}]'"
        msg = f"{what} is not available: install it with {hint}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class Terminated(KeyboardInterrupt):
    """SIGTERM (or another terminating signal) arrived: unwind like Ctrl-C so cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# the last stop signal the CLI's handlers saw: a handler's exception raised inside a C callback
# (an SQLite progress handler) is swallowed there, so long-running C work checks this instead
_received: list[int] = []


def note_signal(signum: int) -> None:
    _received.append(signum)


def signal_received(since: int = 0) -> int | None:
    """The last stop signal noted after the first ``since`` ones (see :func:`signal_count`)."""
    return _received[-1] if len(_received) > since else None


def signal_count() -> int:
    return len(_received)


def stop_exception(signum: int) -> KeyboardInterrupt:
    """What a stop signal raises: KeyboardInterrupt for SIGINT, Terminated for the others."""
    import signal

    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)

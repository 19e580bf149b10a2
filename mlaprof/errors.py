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


def require(cond: bool, message: str) -> None:
    """Raise :class:`MlaprofError` unless ``cond``; a check that survives ``python -O``."""
    if not cond:
        raise MlaprofError(message)

"""The run's progress bar is drawn on a terminal only: on a pipe or file (a script, CI, a
benchmark) rich is not imported and no refresh thread runs."""

from __future__ import annotations

import io
import sys

import pytest

from mlaprof.commands import run


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_on_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with run._progress(False, 4) as update:
        assert update is None


def test_a_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Tty())
    with run._progress(False, 4) as update:
        assert callable(update)
        update(2, 4)


def test_quiet_draws_nothing_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Tty())
    with run._progress(True, 4) as update:
        assert update is None

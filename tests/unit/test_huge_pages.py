"""A command's own process turns NumPy's transparent huge pages off before NumPy is imported
(``NUMPY_MADVISE_HUGEPAGE=0``), unless the user chose, and never in a process that imported
NumPy already (it reads the variable once, on import)."""

from __future__ import annotations

import sys

import pytest

from mlaprof import huge_pages
from mlaprof.huge_pages import VARIABLE


def test_a_command_process_sets_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.delitem(
        sys.modules, "numpy", raising=False
    )  # as at a command's start (restored after)
    huge_pages.command_process()
    assert __import__("os").environ[VARIABLE] == "0"


def test_the_users_choice_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, "1")
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    huge_pages.command_process()
    assert __import__("os").environ[VARIABLE] == "1"


def test_not_after_numpy_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy  # noqa: F401 - imported: too late for the variable to count

    monkeypatch.delenv(VARIABLE, raising=False)
    huge_pages.command_process()
    assert VARIABLE not in __import__("os").environ

"""A command's own process turns transparent huge pages off for NumPy
(``NUMPY_MADVISE_HUGEPAGE=0``) and Arrow's allocator (``MIMALLOC_ALLOW_THP=0``) before either
library is loaded, unless the user chose, and never once the library that reads a variable is
loaded (each reads it once, on load)."""

from __future__ import annotations

import os
import sys

import pytest

from mlaprof import huge_pages
from mlaprof.huge_pages import SETTINGS


def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """As at a command's start: neither library loaded, neither variable set (restored after)."""
    for variable, (_, reader) in SETTINGS.items():
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delitem(sys.modules, reader, raising=False)


def test_a_command_process_sets_both(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(monkeypatch)
    huge_pages.command_process()
    assert {v: os.environ[v] for v in SETTINGS} == {
        "NUMPY_MADVISE_HUGEPAGE": "0",
        "MIMALLOC_ALLOW_THP": "0",
    }


def test_the_users_choice_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(monkeypatch)
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    monkeypatch.setenv("MIMALLOC_ALLOW_THP", "1")
    huge_pages.command_process()
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == os.environ["MIMALLOC_ALLOW_THP"] == "1"


@pytest.mark.parametrize(
    ("loaded", "still_set"),
    [("numpy", {"MIMALLOC_ALLOW_THP"}), ("pyarrow", {"NUMPY_MADVISE_HUGEPAGE"})],
)
def test_not_once_its_reader_is_loaded(
    monkeypatch: pytest.MonkeyPatch, loaded: str, still_set: set[str]
) -> None:
    _fresh(monkeypatch)
    monkeypatch.setitem(sys.modules, loaded, object())  # loaded: too late for its variable
    huge_pages.command_process()
    assert {v for v in SETTINGS if v in os.environ} == still_set

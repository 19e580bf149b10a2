"""A command's own process turns transparent huge pages off for NumPy
(``NUMPY_MADVISE_HUGEPAGE=0``) and Arrow's allocator (``MIMALLOC_ALLOW_THP=0``) and puts NumPy's
OpenBLAS on one thread (``OPENBLAS_NUM_THREADS=1``) before either library is loaded, unless the
user chose, and never once the library that reads a variable is loaded (each reads it once, on
load). A child running the user's code gets the environment the user gave the command."""

from __future__ import annotations

import os
import sys

import pytest

from mlaprof import library_env
from mlaprof.library_env import SETTINGS, child_env

CHOOSERS = {v for _, _, chosen_by in SETTINGS.values() for v in chosen_by}


def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """As at a command's start: neither library loaded, no variable set (restored after)."""
    for variable, (_, reader, _) in SETTINGS.items():
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delitem(sys.modules, reader, raising=False)
    for variable in CHOOSERS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(library_env, "_SET", set())


def test_a_command_process_sets_every_one(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(monkeypatch)
    library_env.command_process()
    assert {v: os.environ[v] for v in SETTINGS} == {
        "NUMPY_MADVISE_HUGEPAGE": "0",
        "MIMALLOC_ALLOW_THP": "0",
        "OPENBLAS_NUM_THREADS": "1",
    }


def test_the_users_choice_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh(monkeypatch)
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    monkeypatch.setenv("MIMALLOC_ALLOW_THP", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    library_env.command_process()
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == os.environ["MIMALLOC_ALLOW_THP"] == "1"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


@pytest.mark.parametrize("chooser", ["OMP_NUM_THREADS", "GOTO_NUM_THREADS"])
def test_a_thread_count_the_user_gave_openblas_otherwise_stands(
    monkeypatch: pytest.MonkeyPatch, chooser: str
) -> None:
    """OpenBLAS takes its thread count from these where its own variable is unset: a user who
    set one chose, and a 1 written over it would overrule them."""
    _fresh(monkeypatch)
    monkeypatch.setenv(chooser, "2")
    library_env.command_process()
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == "0"  # the others are still set


@pytest.mark.parametrize(
    ("loaded", "still_set"),
    [
        ("numpy", {"MIMALLOC_ALLOW_THP"}),
        ("pyarrow", {"NUMPY_MADVISE_HUGEPAGE", "OPENBLAS_NUM_THREADS"}),
    ],
)
def test_not_once_its_reader_is_loaded(
    monkeypatch: pytest.MonkeyPatch, loaded: str, still_set: set[str]
) -> None:
    _fresh(monkeypatch)
    monkeypatch.setitem(sys.modules, loaded, object())  # loaded: too late for its variable
    library_env.command_process()
    assert {v for v in SETTINGS if v in os.environ} == still_set


def test_a_child_gets_the_environment_the_user_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the command set is left out of a child's environment; what the user set is kept,
    and so is everything else."""
    _fresh(monkeypatch)
    monkeypatch.setenv("MIMALLOC_ALLOW_THP", "1")  # the user's
    monkeypatch.setenv("MLAPROF_TEST_OTHER", "x")
    library_env.command_process()
    env = child_env()
    assert "NUMPY_MADVISE_HUGEPAGE" not in env and "OPENBLAS_NUM_THREADS" not in env
    assert env["MIMALLOC_ALLOW_THP"] == "1" and env["MLAPROF_TEST_OTHER"] == "x"
    # a process that set nothing (a notebook, a caller's own process) passes everything on
    monkeypatch.setattr(library_env, "_SET", set())
    assert child_env() == dict(os.environ)

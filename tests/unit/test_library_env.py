"""A command's own process turns transparent huge pages off for NumPy
(``NUMPY_MADVISE_HUGEPAGE=0``) and Arrow's allocator (``MIMALLOC_ALLOW_THP=0``) and puts NumPy's
OpenBLAS on one thread (``OPENBLAS_NUM_THREADS=1``) before either library is loaded, unless the
user chose, and never once the library that reads a variable is loaded (each reads it once, on
load). A child running the user's code gets the environment the user gave the command."""

from __future__ import annotations

import os
import sys
from pathlib import Path

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
    monkeypatch.setattr(library_env, "_STATE", {"command": False, "one_arena": False})
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)


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


class _Libc:
    """A recording stand-in for the process's C library (``ctypes.CDLL(None)``): glibc's
    ``mallopt(param, value)`` answers 1 where it set the parameter (musl's stub answers 0)."""

    def __init__(self, answer: int) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", param, value))
        return self.answer

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", pad))
        return 1


def _libc(monkeypatch: pytest.MonkeyPatch, answer: int = 1) -> _Libc:
    import ctypes

    libc = _Libc(answer)

    def cdll(name: object) -> _Libc:
        if name is not None:
            raise AssertionError(f"only the process's own symbols are asked for, not {name}")
        return libc

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    return libc


def test_an_import_command_allocates_from_one_arena_and_keeps_its_free_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """glibc's M_ARENA_MAX (-8 in malloc.h) set to 1; the per-rank trim then hands nothing back
    (the next rank's allocations reuse the pages)."""
    from mlaprof.importers.common import trim_heap

    _fresh(monkeypatch)
    libc = _libc(monkeypatch)
    library_env.command_process()
    library_env.one_malloc_arena()
    library_env.one_malloc_arena()  # once is enough
    assert libc.calls == [("mallopt", -8, 1)] and library_env.one_arena()
    trim_heap()
    assert libc.calls == [("mallopt", -8, 1)]


@pytest.mark.parametrize("case", ["notebook", "user chose", "not set"])
def test_elsewhere_the_arenas_stay_and_the_trim_hands_pages_back(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """A caller's own process (a notebook) keeps its arenas; so does a user who set
    MALLOC_ARENA_MAX; and where mallopt did not set it (a C library's stub), the trim runs."""
    from mlaprof.importers.common import trim_heap

    _fresh(monkeypatch)
    libc = _libc(monkeypatch, answer=0 if case == "not set" else 1)
    if case != "notebook":
        library_env.command_process()
    if case == "user chose":
        monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    library_env.one_malloc_arena()
    assert not library_env.one_arena()
    trim_heap()
    assert libc.calls[-1] == ("malloc_trim", 0)
    assert [c for c in libc.calls if c[0] == "mallopt"] == (
        [("mallopt", -8, 1)] if case == "not set" else []
    )


def test_the_import_sets_one_arena_before_it_starts_a_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A thread's first allocation picks its arena: the setting must come before any thread."""
    import threading

    from mlaprof.cli import main

    # NumPy and pyarrow stay loaded (a reload of either is a test's artefact, not a command's)
    monkeypatch.setattr(library_env, "_STATE", {"command": False, "one_arena": False})
    order: list[str] = []
    monkeypatch.setattr(library_env, "one_malloc_arena", lambda: order.append("arena"))
    start = threading.Thread.start

    def started(self: threading.Thread) -> None:
        order.append("thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", started)
    trace = Path(__file__).resolve().parents[1] / "data" / "aiter" / "gluon_v0119_bug"
    assert main(["import", "rocprof", str(trace), "--traces", str(tmp_path / "t")]) == 0
    assert order[0] == "arena" and "thread" in order, order

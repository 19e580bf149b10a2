"""The unit tier: pure, in-process tests. A test here that starts a process fails at once, so the
tier stays fast and its boundary is checked, not promised (such tests belong in tests/e2e/)."""

from __future__ import annotations

import subprocess

import pytest


class ProcessInUnitTier(RuntimeError):
    pass


@pytest.fixture(scope="session")
def _revision_read() -> None:
    # the run store asks git for mlaprof's own revision once per process (cached): ask it before
    # the guard, as an installed tool does at its first run
    from mlaprof.store.runmeta import git_revision

    git_revision()


@pytest.fixture(autouse=True)
def _no_child_processes(monkeypatch: pytest.MonkeyPatch, _revision_read: None) -> None:
    def refuse(self, args, *a, **k):  # noqa: ANN001, ANN002, ANN003
        raise ProcessInUnitTier(f"unit tests start no process (move it to tests/e2e/): {args!r}")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)

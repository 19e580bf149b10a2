"""Shared fixtures: small scenarios and runs made on the CPU."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlaprof.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]


def small_scenario(**over) -> Scenario:
    base = Scenario(name="small", kv_lens=[70, 130, 200], layers=2, steps=2)
    return dataclasses.replace(base, **over).validate()


def mlaprof_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run the real console entry (``python -m mlaprof``) in a child process."""
    e = dict(os.environ)
    e.update(env or {})
    e["COLUMNS"] = "120"
    return subprocess.run(
        [sys.executable, *(["-O"] if sys.flags.optimize else []), "-m", "mlaprof", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=e,
        timeout=timeout,
    )


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    d = tmp_path / "traces"
    d.mkdir()
    return d

"""The shipped demo runs (traces/demo/) are true of today's code: each names the git revision
it was recorded from, and every file:line it blames holds the operation it names there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mlaprof
from tests import shipped_demo

ROOT = Path(__file__).resolve().parents[2]
DEMOS = [shipped_demo.run(n) for n in shipped_demo.NAMES]

# what a source line must hold for the sync checker's op to have come from it (the ATen op each
# Python call dispatches to: ``.item()``/``int(t)`` read a scalar back, ``x[0] = 0`` copies)
CALLS = {
    "aten._local_scalar_dense": (".item()", "int("),
    "aten.repeat_interleave.Tensor": ("repeat_interleave",),
    "aten.arange": ("arange",),
    "aten.empty.memory_format": ("empty",),
    "aten.copy_": ("] = ", "copy_", ".to("),
}
LOCATION = re.compile(r"(?P<file>[\w/.-]+\.py):(?P<line>\d+)")


def blamed(run_dir: Path) -> list[tuple[str, str, str]]:
    """(table, op, location) of every sync, allocation and capture failure the run blames."""
    with mlaprof.load(run_dir) as run:
        rows = [("syncs", r.op, r.location) for r in run.syncs.itertuples()]
        rows += [("captures", r.op, r.location) for r in run.captures.itertuples() if r.location]
    return sorted(set(rows))


def line_holds(location: str, op: str) -> str | None:
    """None when ``location`` holds a call of ``op``; else what is wrong."""
    m = LOCATION.fullmatch(location)
    if not m:
        return f"{location!r} is not file:line"
    path = ROOT / m["file"]
    if not path.is_file():
        return f"{m['file']} does not exist"
    lines = path.read_text().splitlines()
    n = int(m["line"])
    if not 1 <= n <= len(lines):
        return f"{location}: the file has {len(lines)} lines"
    code = lines[n - 1].split("#", 1)[0]  # a comment naming the call is not the call
    calls = CALLS.get(op)
    if calls is None:
        return f"{location}: no rule says which call dispatches {op}"
    if not any(c in code for c in calls):
        return (
            f"{location} holds {lines[n - 1].strip()!r}, not a call of {op} ({' / '.join(calls)})"
        )
    return None


def test_demo_runs_are_shipped() -> None:
    if len(DEMOS) < 6:
        raise AssertionError(f"{len(DEMOS)} shipped demo runs, not 6")


@pytest.mark.parametrize("run_dir", DEMOS, ids=[p.name for p in DEMOS])
def test_demo_run_names_its_revision(run_dir: Path) -> None:
    with mlaprof.load(run_dir) as run:
        git = run.meta.get("git")
    if not isinstance(git, str) or not re.fullmatch(r"[0-9a-f]{7,40}", git):
        raise AssertionError(f"{run_dir.name}: git {git!r}, not a clean revision")


@pytest.mark.parametrize("run_dir", DEMOS, ids=[p.name for p in DEMOS])
def test_demo_run_blames_lines_that_hold_the_call(run_dir: Path) -> None:
    wrong = [
        f"{t} {op} at {loc}: {w}" for t, op, loc in blamed(run_dir) if (w := line_holds(loc, op))
    ]
    if wrong:
        raise AssertionError("\n".join(wrong))


def test_the_line_check_tells_a_comment_from_the_call() -> None:
    src = (ROOT / "mlaprof/backends/legacy_flat.py").read_text().splitlines()
    item = next(i for i, s in enumerate(src, 1) if ".item()" in s.split("#")[0])
    assert line_holds(f"mlaprof/backends/legacy_flat.py:{item}", "aten._local_scalar_dense") is None
    comment = next(i for i, s in enumerate(src, 1) if s.strip().startswith("#"))
    assert line_holds(f"mlaprof/backends/legacy_flat.py:{comment}", "aten._local_scalar_dense")
    assert line_holds("mlaprof/backends/legacy_flat.py:99999", "aten.arange")

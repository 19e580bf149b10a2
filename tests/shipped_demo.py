"""The shipped demo runs as the tests read them: a copy, made once per process in a temporary
folder, of the runs traces/demo/ ships. No test reads or writes the working tree's traces/ (a run
a user recorded or imported there would change what a test sees; a test that wrote there would
change the next reader's): the copy holds exactly the shipped runs, named by their committed
golden summaries (tests/data/summary_golden/demo-<name>.json), whatever else traces/ holds.
tests/conftest.py fails the suite when traces/ or out/ of the working tree changed during it."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "traces" / "demo"
README = ROOT / "traces" / "README.md"  # the shipped runs' document (committed, read only)
# the shipped runs: one committed golden summary each (not whatever traces/demo/ holds today)
NAMES = sorted(
    p.stem.removeprefix("demo-")
    for p in (ROOT / "tests" / "data" / "summary_golden").glob("demo-*.json")
)


@functools.cache
def traces() -> Path:
    """A traces folder holding ``demo/<name>`` for each shipped run (``demo/`` only)."""
    tmp = tempfile.mkdtemp(prefix="mlaprof-demo-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    root = Path(tmp) / "traces"
    for name in NAMES:
        # run.json and the rank databases as committed; a -wal/-shm a reader left is no part
        shutil.copytree(SOURCE / name, root / "demo" / name,
                        ignore=shutil.ignore_patterns("*-wal", "*-shm", "*-journal"))  # fmt: skip
    return root


def folder() -> Path:
    """The copy's ``demo`` folder (what ``ROOT / "traces" / "demo"`` was)."""
    return traces() / "demo"


def run(name: str) -> Path:
    """The copy of the shipped run ``name``."""
    if name not in NAMES:
        raise KeyError(f"{name!r} is not a shipped demo run ({', '.join(NAMES)})")
    return folder() / name

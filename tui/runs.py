"""Runs of a folder for the picker: its runs and those one folder down (``traces/demo/...``)."""

from __future__ import annotations

from pathlib import Path

from mlaprof.store import RunInfo, list_runs


def collect_runs(folder: Path) -> list[RunInfo]:
    """Newest first; a run one level down is named ``sub/run``."""
    runs = list_runs(folder)
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        if (sub / "run.json").exists():
            continue
        try:
            inner = list_runs(sub)
        except Exception:  # an unreadable sub-folder is not a reason to show no runs
            continue
        for r in inner:
            r.name = f"{sub.name}/{r.name}"
        runs += inner
    runs.sort(key=lambda r: (r.created, r.name), reverse=True)
    return runs


def is_run_folder(path: Path) -> bool:
    """A run (run.json or rank databases), or a path that does not exist yet (a run starting)."""
    if not path.exists():
        return True
    return (path / "run.json").exists() or any(path.glob("rank*.db"))

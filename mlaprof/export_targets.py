"""Where exports go and which exporter writes each format: one place for ``mlaprof export`` and
the TUI's ``e`` key.

Exports default to ``./out/`` under the current directory (git-ignored), never next to the run:
a run under ``traces/demo`` is tracked data, and an export is a by-product.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

# format -> (module, function, suffix); each function is ``export(run, out) -> {what: count}``
FORMATS: dict[str, tuple[str, str, str]] = {
    "perfetto": ("mlaprof.exporters.perfetto", "export_perfetto", ".perfetto.json"),
    "rocpd": ("mlaprof.exporters.rocpd_export", "export_rocpd", ".rocpd.db"),
    "csv": ("mlaprof.exporters.csv_export", "export_csv", "_csv"),
}
# a run of several ranks exports a folder in these formats (a rocpd database holds one
# process: one per rank, mlaprof.exporters.rocpd_export), named so
FOLDER_SUFFIX = {"rocpd": "_rocpd"}
DEFAULT_DIR = Path("out")


def exporter(fmt: str) -> Callable[[Any, Path], dict[str, int]]:
    mod, fn, _ = FORMATS[fmt]
    return getattr(importlib.import_module(mod), fn)


def free_path(path: Path) -> Path:
    """``path``, or ``path`` with -2, -3, ... before its suffix when it exists (never overwrite)."""
    if not path.exists():
        return path
    stem, dot, ext = path.name.partition(".")
    i = 2
    while True:
        cand = path.with_name(f"{stem}-{i}{dot}{ext}")
        if not cand.exists():
            return cand
        i += 1


def default_output(run_dir: Path, fmt: str, folder: Path | None = None, ranks: int = 1) -> Path:
    """``./out/<run><suffix>`` (a free name: an earlier export is never overwritten); a run of
    several ``ranks`` gets the format's folder suffix where it writes a folder of them."""
    folder = DEFAULT_DIR if folder is None else folder
    suffix = FOLDER_SUFFIX.get(fmt, FORMATS[fmt][2]) if ranks > 1 else FORMATS[fmt][2]
    return free_path(folder / f"{Path(run_dir).name}{suffix}").absolute()

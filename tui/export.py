"""Export key: hands the run to ``mlaprof.trace_io``'s exporters (the ones ``mlaprof export``
uses) when they are installed; files go next to the run, like ``mlaprof export`` writes them."""

from __future__ import annotations

import importlib
from pathlib import Path

from mlaprof.errors import MlaprofError

# (module, function, suffix); each function is ``export(run: Run, out: Path) -> dict[str, int]``
EXPORTERS = (
    ("mlaprof.trace_io.perfetto", "export_perfetto", ".perfetto.json"),
    ("mlaprof.trace_io.rocpd_export", "export_rocpd", ".rocpd.db"),
    ("mlaprof.trace_io.csv_export", "export_csv", "_csv"),
)


def _free(path: Path) -> Path:
    """``path``, or ``path`` with -2, -3, ... before its suffix when it exists (never overwrite)."""
    if not path.exists():
        return path
    name = path.name
    stem, dot, ext = name.partition(".")
    i = 2
    while True:
        cand = path.with_name(f"{stem}-{i}{dot}{ext}")
        if not cand.exists():
            return cand
        i += 1


def export_run(path: Path) -> tuple[bool, str]:
    """Run every available exporter; (ok, one line for the user)."""
    from mlaprof.store import load

    path = Path(path)
    found = []
    for mod_name, fn_name, suffix in EXPORTERS:
        try:
            found.append((getattr(importlib.import_module(mod_name), fn_name), suffix))
        except (ImportError, AttributeError):
            continue
    if not found:
        return False, "export not available: mlaprof.trace_io has no exporters installed"
    done, failed = [], []
    try:
        run = load(path)
    except Exception as e:  # a run deleted or corrupted meanwhile: say so, keep the dashboard
        return False, f"export failed: {e}"
    with run:
        for fn, suffix in found:
            out = _free(path.parent / f"{path.name}{suffix}")
            try:
                fn(run, out)
                done.append(out.name)
            except MlaprofError as e:  # nothing to export in that format, or a bad target
                failed.append(f"{suffix.strip('._')} skipped ({e})")
            except Exception as e:  # an exporter's bug is reported, never crashes the view
                failed.append(f"{suffix.strip('._')} failed ({type(e).__name__}: {e})")
    text = f"exported {', '.join(done)} to {path.parent}" if done else "export failed"
    if failed:
        text += "; " + "; ".join(failed)
    return bool(done), text

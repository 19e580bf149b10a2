"""Export key: hands the run to ``mlaprof.trace_io``'s exporters when they are installed."""

from __future__ import annotations

import importlib
from pathlib import Path

# (module, function, output name) tried in order; the exporters live in mlaprof.trace_io
EXPORTERS = (
    ("mlaprof.trace_io.perfetto", "export_perfetto", "trace.perfetto.json"),
    ("mlaprof.trace_io.rocpd", "export_rocpd", "trace.rocpd.db"),
    ("mlaprof.trace_io.csv_export", "export_csv", "csv"),
)


def export_run(path: Path) -> tuple[bool, str]:
    """Run every available exporter into ``<run>/export/``; (ok, one line for the user)."""
    out_dir = Path(path) / "export"
    done, failed = [], []
    for mod_name, fn_name, out_name in EXPORTERS:
        try:
            fn = getattr(importlib.import_module(mod_name), fn_name)
        except (ImportError, AttributeError):
            continue
        try:
            out_dir.mkdir(exist_ok=True)
            fn(path, out_dir / out_name)
            done.append(out_name)
        except Exception as e:  # an exporter's failure is reported, never crashes the dashboard
            failed.append(f"{out_name}: {e}")
    if not done and not failed:
        return False, "export not available: mlaprof.trace_io has no exporters installed yet"
    text = f"exported {', '.join(done)} to {out_dir}" if done else "export failed"
    if failed:
        text += "; failed: " + "; ".join(failed)
    return bool(done), text

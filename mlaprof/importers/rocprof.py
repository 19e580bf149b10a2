"""``mlaprof import rocprof PATH``: a rocprofv3 CSV or JSON file, a rocpd database, or an output
folder, into one run (all or nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mlaprof.errors import MlaprofError
from mlaprof.importers import rocpd_sqlite, rocprof_csv, rocprof_json
from mlaprof.importers.annotate import KernelColumns, concat, store_kernels
from mlaprof.importers.common import ImportSummary, read_text
from mlaprof.importers.kernels import KernelMatcher
from mlaprof.store.staging import staged_run


def _is_rocprof_json(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return rocprof_json.TOP_KEY.encode() in head


def collect(path: Path) -> tuple[str, list[Path]]:
    """The files of one format to import from ``path`` (a folder holds one run's outputs, often
    in several formats at once: rocpd databases win, then JSON, then CSVs)."""
    if not path.exists():
        raise MlaprofError(f"{path} does not exist")
    if path.is_file():
        if rocpd_sqlite.is_sqlite(path):
            return "rocpd", [path]
        if path.suffix.lower() in (".json", ".gz") or _is_rocprof_json(path):
            return "json", [path]
        return "csv", [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    dbs = [p for p in files if p.suffix == ".db" and rocpd_sqlite.is_sqlite(p)]
    if dbs:
        return "rocpd", dbs
    jsons = [p for p in files if p.suffix == ".json" and _is_rocprof_json(p)]
    if jsons:
        return "json", jsons
    csvs = [p for p in files if p.suffix.lower() == ".csv"]
    if csvs:
        return "csv", csvs
    raise MlaprofError(f"{path} holds no rocprofv3 output (.db, .json or .csv files)")


def import_rocprof(
    path: Path | str,
    traces: Path | str,
    name: str | None = None,
    matcher: KernelMatcher | None = None,
    use_arrow: bool = True,
) -> tuple[Path, ImportSummary]:
    path = Path(path)
    fmt, files = collect(path)
    matcher = matcher or KernelMatcher()
    summary = ImportSummary(source=f"rocprof-{fmt}")
    # rocprofv3 grids count work-items; a round-tripped mlaprof export keeps its own units
    meta: dict[str, Any] = {
        "source": "rocprof",
        "imported_from": str(path.resolve()),
        "format": fmt,
        "grid_units": "workitems",
    }
    run_name = name or f"rocprof-{path.stem or 'import'}"
    with staged_run(traces, run_name, meta) as (bulk, final):
        embedded: dict[str, Any] = {}
        parts: list[KernelColumns] = []
        for f in files:
            kc: KernelColumns | None
            if fmt == "csv":
                kc = rocprof_csv.import_csv(bulk, f, summary, use_arrow)
            elif fmt == "json":
                kc = rocprof_json.import_json(f, read_text(f, "JSON file"), bulk, summary)
            else:
                found, kc = rocpd_sqlite.import_rocpd(f, bulk, summary)
                embedded = found or embedded
            if kc is not None:
                parts.append(kc)
        kernels = concat(parts)
        if kernels is not None:
            store_kernels(bulk, kernels, matcher, summary, grid_in_workitems=True)
        if not any(summary.rows.values()):
            raise MlaprofError(f"{path}: no records found (empty trace)")
        if embedded:
            summary.notes.append("mlaprof export: steps, layers and analysis tables restored")
        bulk.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('import', ?)",
            (json.dumps({"files": summary.files, "rows": summary.rows}),),
        )
        if embedded:
            _restore_meta(bulk.run_dir, embedded)
    return final, summary


def _restore_meta(run_dir: Path, embedded: dict[str, Any]) -> None:
    """Carry the exported run's descriptive metadata (scenario, device, backend) over."""
    from mlaprof.store import runmeta

    keep = {
        k: v
        for k, v in embedded.items()
        if k not in ("name", "created", "status", "schema_version", "imported_from", "format")
    }
    keep["exported_from"] = embedded.get("name")
    runmeta.update(run_dir, **keep)
